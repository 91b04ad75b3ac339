"""A document's identity inside the dedup phases: one ``uint64``, stable across shardings.

    source (8 bits) | file (28 bits) | row (28 bits)

``file`` is the document's curated file's index in the run's frozen list of curated files
(sorted by path, so the order of identities is the order of files and rows), ``row`` its
row there. ``source`` is ``THIS_RUN`` for the run's own documents and, for an earlier run
given with ``--dedup-against``, its number in that list: earlier runs' documents sort
first, so their copy is always the one kept. Strings (``path#row``) appear only at the
edges: the audit output and messages.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FILE_BITS = ROW_BITS = 28
SOURCE_SHIFT = FILE_BITS + ROW_BITS
ROW_MASK = (1 << ROW_BITS) - 1
FILE_MASK = (1 << FILE_BITS) - 1
LOCAL_MASK = (1 << SOURCE_SHIFT) - 1  # file and row
THIS_RUN = 255
MAX_FILES, MAX_ROWS = 1 << FILE_BITS, 1 << ROW_BITS


def identities(file: int, rows: np.ndarray, source: int = THIS_RUN) -> np.ndarray:
    """The identities of ``rows`` of the ``file``-th curated file."""
    if not 0 <= file < MAX_FILES:
        raise ValueError(f"a run's dedup handles at most {MAX_FILES:,} curated files, not {file + 1:,}")
    if len(rows) and int(rows.max()) >= MAX_ROWS:
        raise ValueError(f"a curated file may hold at most {MAX_ROWS:,} rows for dedup, not {int(rows.max()) + 1:,}")
    return (np.uint64(source) << np.uint64(SOURCE_SHIFT)) | (np.uint64(file) << np.uint64(ROW_BITS)) \
        | rows.astype(np.uint64)


def sources(ids: np.ndarray) -> np.ndarray:
    return (ids >> np.uint64(SOURCE_SHIFT)).astype(np.int64)


def files(ids: np.ndarray) -> np.ndarray:
    return ((ids >> np.uint64(ROW_BITS)) & np.uint64(FILE_MASK)).astype(np.int64)


def rows(ids: np.ndarray) -> np.ndarray:
    return (ids & np.uint64(ROW_MASK)).astype(np.int64)


def with_source(ids: np.ndarray, source: int) -> np.ndarray:
    """``ids`` as documents of ``source`` (an earlier run's, read by this one)."""
    return (ids & np.uint64(LOCAL_MASK)) | (np.uint64(source) << np.uint64(SOURCE_SHIFT))


def describe(identity: int, paths: Sequence[str]) -> str:
    """``path#row`` of one of this run's identities (for audits and messages)."""
    file, row = (identity >> ROW_BITS) & FILE_MASK, identity & ROW_MASK
    return f"{paths[file]}#{row}"

"""Token-file sets and the run-wide shuffle: which set a document's tokens go to, and the key
that orders documents within a set.

A set is named by the values of the ``--token-partition-by`` fields, nested in the order
given (``language=de/quality_bucket=7``), each value escaped so that it is one safe path
segment; a document without a field goes to ``FIELD=__missing__``. A document's shuffle key
is the first 8 bytes of BLAKE2b over the seed, the output file it is in (relative to the
output dir) and its row there: neither depends on how the run was sharded nor on which
attempt wrote it, so sorting a set by key gives the same order on any sharding, after any
retry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from urllib.parse import quote

import numpy as np

MISSING = "__missing__"


def segment(value: object) -> str:
    """``value`` as one path segment: percent-escaped, never ``.``/``..`` or empty."""
    if value is None:
        return MISSING
    text = quote(str(value), safe="")
    return "%2E" + text[1:] if text.startswith(".") else text or "%00"


def set_names(fields: Sequence[str], columns: Sequence[Sequence[object]], rows: int) -> list[str]:
    """Each row's set name (``""`` without fields): ``columns`` holds each field's values."""
    if not fields:
        return [""] * rows
    return ["/".join(f"{field}={segment(values[row])}" for field, values in zip(fields, columns)) for row in range(rows)]


def shuffle_keys(seed: int, relative: str, rows: Sequence[int]) -> np.ndarray:
    """Each row's shuffle key (uint64)."""
    prefix = f"{seed}\0{relative}\0".encode()
    return np.fromiter((int.from_bytes(hashlib.blake2b(prefix + str(row).encode(), digest_size=8).digest(), "little")
                        for row in rows), dtype=np.uint64, count=len(rows))

"""A document's identity inside the dedup phases, stable across runs and shardings.

``relative/output/path#row`` of the file the curation phase wrote (output files are named
after source tasks, so the key does not depend on shard or task counts); rows are
zero-padded so keys sort by row. An earlier run's documents (``--dedup-against``) carry a
prefix that sorts before every path, so an earlier run's copy is always the one kept.
"""

from __future__ import annotations

ROW_DIGITS = 10
AGAINST_PREFIX = "\x00"


def document_key(relative_path: str, row: int) -> str:
    return f"{relative_path}#{row:0{ROW_DIGITS}d}"


def split_key(key: str) -> tuple[str, int]:
    path, _, row = key.rpartition("#")
    return path, int(row)


def against_prefix(number: int) -> str:
    """The key prefix of the documents of the ``number``-th earlier run."""
    return f"{AGAINST_PREFIX}{number}{AGAINST_PREFIX}"


def is_against(key: str) -> bool:
    return key.startswith(AGAINST_PREFIX)

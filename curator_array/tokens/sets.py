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


def parse_rehydration(text: str) -> tuple[tuple[int, int, int], ...]:
    """``--rehydrate`` as (lowest size, highest size, copies) ranges: ``1:1,2-4:2,5-100:3``.
    The ranges start at 1 and follow each other without gaps or overlaps; a cluster larger
    than the last range takes the last range's copies."""
    ranges = []
    for item in (part.strip() for part in text.split(",")):
        sizes, _, copies = item.partition(":")
        low, _, high = sizes.partition("-")
        try:
            entry = (int(low), int(high or low), int(copies))
        except ValueError:
            raise ValueError(f"{item!r} is not SIZE:COPIES or LOW-HIGH:COPIES (whole numbers)") from None
        if entry[0] > entry[1] or entry[2] < 0:
            raise ValueError(f"{item!r}: the sizes run low to high, the copies are at least 0")
        expected = ranges[-1][1] + 1 if ranges else 1
        if entry[0] != expected:
            raise ValueError(f"{item!r}: the ranges start at 1 and follow each other (expected {expected} here)")
        ranges.append(entry)
    return tuple(ranges)


def range_of(ranges: Sequence[tuple[int, int, int]], sizes: np.ndarray) -> np.ndarray:
    """Each cluster size's range, as an index into ``ranges`` (beyond the last range: the last)."""
    highs = np.array([high for _, high, _ in ranges])
    return np.minimum(np.searchsorted(highs, np.maximum(sizes, 1), side="left"), len(ranges) - 1)


def copies_of(ranges: Sequence[tuple[int, int, int]], sizes: np.ndarray) -> np.ndarray:
    """Each cluster size's copies by ``ranges``."""
    return np.array([count for _, _, count in ranges])[range_of(ranges, sizes)]


def range_label(entry: tuple[int, int, int]) -> str:
    low, high, copies = entry
    return f"{low}:{copies}" if low == high else f"{low}-{high}:{copies}"


def spread_keys(keys: np.ndarray, copies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document repeated ``copies`` times (its row, as an index into ``keys``) and each
    copy's key: copy k of c is k/c of the way round the 64-bit key ring from the document's
    key, so a set sorted by key holds a document's copies evenly apart."""
    rows = np.repeat(np.arange(len(keys)), copies)
    first = np.concatenate([[0], np.cumsum(copies)[:-1]]).astype(np.int64)
    k = np.arange(len(rows)) - np.repeat(first, copies)
    step = (np.float64(2.0 ** 64) / np.maximum(np.repeat(copies, copies), 1)).astype(np.float64)
    offsets = np.floor(k * step).astype(np.uint64) if len(rows) else np.zeros(0, np.uint64)
    return rows, keys[rows] + offsets  # wraps around the ring

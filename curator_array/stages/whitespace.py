"""Whitespace-separated words per text of an Arrow column, counted as ``len(text.split())``.

The word-count filter runs on every document of a shard, so this is on the hot path of the
plainest pipeline. A regular expression over Unicode classes costs about 17 ms per MB; most
text is ASCII, where a word starts at every non-space byte after a space byte, which numpy
finds in one pass over the column's data buffer (no string objects, no lists of words).
Rows with other characters (where ``split`` also splits at U+00A0, U+3000, U+0085, ...)
are counted by the expression, only those rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# A run of characters that str.split() would not split at (it splits at Unicode whitespace).
WORD = r"[^\s\p{Z}\x{85}\x0b\x0c\x1c-\x1f]+"


def count_words(text: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """Words per text (0 for a null), as an int64 column with the input's chunks."""
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    return pa.chunked_array([_count_chunk(chunk) for chunk in chunks], pa.int64())


def _count_chunk(chunk: pa.Array) -> pa.Array:
    if len(chunk) == 0:
        return pa.array([], pa.int64())
    counts = _count_ascii(chunk)
    other = pc.invert(pc.fill_null(pc.string_is_ascii(chunk), True))
    if pc.any(other).as_py():
        rows = np.flatnonzero(other.to_numpy(zero_copy_only=False))
        counts[rows] = pc.count_substring_regex(chunk.take(pa.array(rows)), WORD).to_numpy(zero_copy_only=False)
    if chunk.null_count:
        counts[chunk.is_null().to_numpy(zero_copy_only=False)] = 0
    return pa.array(counts, pa.int64())


def _count_ascii(chunk: pa.Array) -> np.ndarray:
    """Words per row, every byte >= 0x80 taken as part of a word."""
    offset_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    _, offsets_buffer, data_buffer = chunk.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[chunk.offset:chunk.offset + len(chunk) + 1]
    offsets = offsets.astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    if data_buffer is None or last == first:
        return np.zeros(len(chunk), dtype=np.int64)
    space = _ascii_space(np.frombuffer(data_buffer, dtype=np.uint8, count=last - first, offset=first))
    starts, ends = offsets[:-1] - first, offsets[1:] - first
    begins = ~space
    begins[1:] &= space[:-1]
    filled = starts[ends > starts]
    begins[filled] = ~space[filled]  # a row's first byte begins a word whatever the row before ended with
    positions = np.flatnonzero(begins)
    return np.searchsorted(positions, ends) - np.searchsorted(positions, starts)


def _ascii_space(data: np.ndarray) -> np.ndarray:
    """The bytes str.split() splits at: the space, \\t \\n \\v \\f \\r (9-13) and \\x1c-\\x1f (28-31).
    Comparisons, with uint8 wrapping below 9 and 28: four times faster than a lookup table."""
    return (data == 32) | ((data - np.uint8(9)) <= 4) | ((data - np.uint8(28)) <= 3)

"""Words per text of an Arrow column, counted as ``len(text.split())``, at the speed of a byte scan.

A word is a maximal run of characters that are not whitespace, and whitespace is what
Python's ``str.isspace`` (and Arrow's ``utf8_split_whitespace``) calls so: the ASCII space,
\\t \\n \\v \\f \\r, the separators \\x1c-\\x1f, and the Unicode spaces U+0085, U+00A0, U+1680,
U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. Nothing else separates words:
not U+200B (zero-width space), not punctuation, not a change of script (CJK text without
spaces is one word per run, as ``split`` has it).

The word-count filter runs on every document of a shard, so this is on the hot path of the
plainest pipeline, and real text is rarely pure ASCII (curly quotes, dashes, any language
but English). So the count never looks at characters: it marks the space bytes of the
column's UTF-8 data buffer with numpy (every byte of a multi-byte space, found from the
few lead bytes such a space can start with), and a word begins at each other byte that
follows a space byte or opens a row. A continuation byte always follows its lead byte, so
a multi-byte letter begins at most one word. No string objects, no lists of words, no
regular expression; ASCII and other rows cost the same.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# Lead bytes of the multi-byte spaces: U+0085 and U+00A0 (C2), U+1680 (E1), U+2000-U+205F
# (E2), U+3000 (E3).
_TWO_BYTE_LEAD, _OGHAM_LEAD, _GENERAL_LEAD, _IDEOGRAPHIC_LEAD = 0xC2, 0xE1, 0xE2, 0xE3


# Bytes of text counted at once: the scan makes several passes over a piece, which run three
# times faster when the piece and its masks stay in the CPU's cache.
PIECE_BYTES = 1 << 20


def count_words(text: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """Words per text (0 for a null), as an int64 column with the input's chunks."""
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    return pa.chunked_array([_count_chunk(chunk) for chunk in chunks], pa.int64())


def _count_chunk(chunk: pa.Array) -> pa.Array:
    if len(chunk) == 0:
        return pa.array([], pa.int64())
    offsets = _offsets(chunk)
    cuts = np.unique(np.searchsorted(offsets, np.arange(offsets[0], offsets[-1], PIECE_BYTES), side="right") - 1)
    bounds = [*cuts[cuts > 0].tolist(), len(chunk)]
    if len(bounds) == 1:
        return pa.array(_count_piece(chunk, offsets))
    pieces, start = [], 0
    for stop in bounds:
        pieces.append(_count_piece(chunk.slice(start, stop - start), offsets[start:stop + 1]))
        start = stop
    return pa.array(np.concatenate(pieces))


def _offsets(chunk: pa.Array) -> np.ndarray:
    offset_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    offsets = np.frombuffer(chunk.buffers()[1], dtype=offset_type)[chunk.offset:chunk.offset + len(chunk) + 1]
    return offsets.astype(np.int64)


def _count_piece(chunk: pa.Array, offsets: np.ndarray) -> np.ndarray:
    validity, _, data_buffer = chunk.buffers()
    first, last = int(offsets[0]), int(offsets[-1])
    if data_buffer is None or last == first:
        return np.zeros(len(chunk), dtype=np.int64)
    data = np.frombuffer(data_buffer, dtype=np.uint8, count=last - first, offset=first)
    space = space_bytes(data)
    starts, ends = offsets[:-1] - first, offsets[1:] - first
    begins = ~space
    begins[1:] &= space[:-1]
    filled = ends > starts
    first_bytes = starts[filled]
    begins[first_bytes] = ~space[first_bytes]  # a row's first byte begins a word whatever the row before ended with
    # Word beginnings summed per row with bytes, in one pass (empty rows lie between them and hold none).
    counts = np.zeros(len(chunk), dtype=np.int64)
    counts[filled] = np.add.reduceat(begins.view(np.uint8), first_bytes, dtype=np.int64)
    if validity is not None and chunk.null_count:
        counts[chunk.is_null().to_numpy(zero_copy_only=False)] = 0  # a null's offsets may span bytes
    return counts


def space_bytes(data: np.ndarray) -> np.ndarray:
    """For each byte of valid UTF-8, whether it belongs to a whitespace character."""
    space = _ascii_space(data)
    if data.max() < _TWO_BYTE_LEAD:  # a reduction at memory speed spares ASCII text the search below
        return space
    leads = np.flatnonzero((data == _TWO_BYTE_LEAD) | ((data - np.uint8(_OGHAM_LEAD)) <= 2))
    end = len(data) - 1  # a lead byte's continuation bytes are in the buffer; guard the C2 at the very end
    lead, second, third = data[leads], data[np.minimum(leads + 1, end)], data[np.minimum(leads + 2, end)]
    two = (lead == _TWO_BYTE_LEAD) & ((second == 0x85) | (second == 0xA0))
    three = (((lead == _GENERAL_LEAD) & (second == 0x80)
              & ((third <= 0x8A) | (third == 0xA8) | (third == 0xA9) | (third == 0xAF)))
             | ((lead == _GENERAL_LEAD) & (second == 0x81) & (third == 0x9F))
             | ((lead == _OGHAM_LEAD) & (second == 0x9A) & (third == 0x80))
             | ((lead == _IDEOGRAPHIC_LEAD) & (second == 0x80) & (third == 0x80)))
    found = leads[two | three]
    space[found] = True
    space[found + 1] = True
    space[leads[three] + 2] = True
    return space


def _ascii_space(data: np.ndarray) -> np.ndarray:
    """The ASCII bytes str.split() splits at: the space, \\t \\n \\v \\f \\r (9-13) and \\x1c-\\x1f
    (28-31). Comparisons, with uint8 wrapping below 9 and 28: four times faster than a lookup table."""
    return (data == 32) | ((data - np.uint8(9)) <= 4) | ((data - np.uint8(28)) <= 3)

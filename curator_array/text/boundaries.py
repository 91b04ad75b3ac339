"""Unicode word boundaries (UAX #29), as ``uniseg`` and Rust's ``unicode-segmentation`` find
them: DCLM's RefinedWeb rules count the words between them, and its paragraph dedup (BFF)
makes n-grams of every piece between them that is not whitespace (punctuation included).
"""

from __future__ import annotations

import regex

WORD_BOUNDARY = regex.compile(r"(?wV1)\b")


# A run of non-whitespace up to the next boundary is exactly such a piece (whitespace is
# never inside one); a newline stands for itself, so one search over texts joined by
# newlines finds every paragraph's pieces and where each paragraph ends.
PIECE_OR_NEWLINE = regex.compile(r"(?wV1)\S+?\b|\n")
PIECE = regex.compile(r"(?wV1)\S+?\b")


def _split_disagrees() -> str:
    """The characters that ``str.split()`` (and Arrow) take for whitespace and the boundary
    search does not, or the reverse (every whitespace character is below U+3001)."""
    space = regex.compile(r"(?wV1)\s")
    return "".join(c for c in map(chr, range(0x3001)) if c.isspace() != bool(space.match(c)))


# Where a paragraph has none of these, its pieces are those of its ``str.split()`` tokens,
# each cut on its own: whitespace is a boundary on both sides, and no rule of UAX #29 looks
# across it (a mark after a space belongs to the space, as one at the start of a token
# stands alone: either way it is a piece of its own).
SPLIT_DISAGREES = regex.compile("[" + regex.escape(_split_disagrees()) + "]")


def bff_tokens(text: str) -> list[str]:
    """The pieces of ``text`` between word boundaries that hold something besides whitespace
    (BFF's ``split_word_bounds`` without the whitespace pieces)."""
    return [piece for piece in WORD_BOUNDARY.split(text) if piece and not piece.isspace()]

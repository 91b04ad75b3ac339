"""Words as near-duplicate detection and decontamination compare them.

Text is simplified as FineWeb normalises it for MinHash (lower case, numbers as 0,
punctuation and symbols as spaces, whitespace collapsed, diacritics removed), then split
into words by each document's language, as the quality filters split it: at spaces, or by
SudachiPy (Japanese) and jieba (Chinese). A word's hash is a BLAKE2b digest, the same in
every process and run, so n-gram keys built from it (``text.ngrams``) match across elements.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..text.segmenters import SEGMENTERS

SPACED, NONE = "spaced", "none"
# Python's whitespace (``str.isspace``), as FineWeb's normalisation collapses it: RE2's \s is
# ASCII's alone, so the Unicode separators (no-break and ideographic spaces, ...) are added.
WHITESPACE = r"[\s\p{Z}\x{0b}\x{1c}-\x{1f}\x{85}]+"


def simplify(texts: pa.Array) -> pa.Array:
    """Texts as near-duplicate detection compares them (FineWeb's normalisation)."""
    return fold_diacritics(pc.utf8_trim_whitespace(pc.replace_substring_regex(_unpunctuated(texts), WHITESPACE, " ")))


def _unpunctuated(texts: pa.Array) -> pa.Array:
    """Lower case, numbers as 0, punctuation and symbols as spaces."""
    text = pc.utf8_lower(pc.fill_null(texts, "") if texts.null_count else texts)  # pa.scalar imports pandas
    text = pc.replace_substring_regex(text, r"\p{Nd}+(?:[.,٫]\p{Nd}+)*", "0")
    return pc.replace_substring_regex(text, r"[\p{P}\p{S}]", " ")


def fold_diacritics(text: pa.Array) -> pa.Array:
    """Texts without their diacritics, as FineWeb removes them: decomposed (NFD), then every
    nonspacing mark dropped.

    In Arrow's compute functions rather than character by character in Python: five times
    faster on text that is not ASCII. Arrow's tables of marks are newer than Python 3.11's
    (Unicode 14), so the few dozen marks assigned since are removed here too.
    """
    if pc.all(pc.string_is_ascii(text)).as_py() is not False:  # nothing to fold: skip two passes
        return text
    return pc.replace_substring_regex(pc.utf8_normalize(text, "NFD"), r"\p{Mn}+", "")


KNOWN_WORDS = 1 << 18  # words whose hash a process keeps: the frequent ones come first (about 30 MB)
_KNOWN: dict[str, int] = {}


def _hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")


def word_hashes(words: pa.Array) -> np.ndarray:
    """A stable 64-bit hash per word: each distinct word of the batch hashed once, or found
    among the words this process hashed before (a batch shares most of its words with the
    batches before it)."""
    encoded = pc.dictionary_encode(words)
    values = [_word_hash(word) for word in encoded.dictionary.to_pylist()]
    return np.array(values, dtype=np.uint64)[encoded.indices.to_numpy(zero_copy_only=False)]


KNOWN_TOKENS = 1 << 19  # tokens whose pieces' hashes a process keeps (about 60 MB)


class _TokenPieces:
    """The word hashes of the pieces of each token this process has cut: a token's number,
    and per number where its hashes start in one flat array and how many it has."""

    def __init__(self) -> None:
        self.number: dict[str, int] = {}
        self.first, self.count, self.ids = array("q"), array("q"), array("Q")

    def numbers(self, tokens: list[str]) -> np.ndarray:
        """The numbers of ``tokens``, each new one cut (``PIECE``) and remembered first."""
        from ..text.boundaries import PIECE

        if len(self.number) + len(tokens) > KNOWN_TOKENS:
            self.__init__()
        found = list(map(self.number.get, tokens))
        for position in [i for i, number in enumerate(found) if number is None]:
            token = tokens[position]
            hashes = [_word_hash(piece) for piece in PIECE.findall(token)]
            found[position] = self.number[token] = len(self.first)
            self.first.append(len(self.ids))
            self.count.append(len(hashes))
            self.ids.extend(hashes)
        return np.array(found, dtype=np.int64)


_TOKENS = _TokenPieces()


def paragraph_word_ids(paragraphs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """BFF's words of every paragraph (``text.boundaries``: the pieces between Unicode word
    boundaries that are not whitespace) as word hashes in one array, and how many each
    paragraph has. The boundary search is the costliest step, and most whitespace-separated
    tokens of a corpus recur, so the paragraphs are split at whitespace by Arrow, each
    distinct token is cut once and its pieces' hashes remembered, and every token takes
    its pieces in numpy (``SPLIT_DISAGREES`` says why that finds the same pieces)."""
    from ..text.boundaries import SPLIT_DISAGREES

    if SPLIT_DISAGREES.search("\n".join(paragraphs)):
        return _word_ids_by_search(paragraphs)
    split = pc.utf8_split_whitespace(pa.array(paragraphs, pa.large_string()))
    tokens = pc.dictionary_encode(pc.list_flatten(split))
    numbers = _TOKENS.numbers(tokens.dictionary.to_pylist())[tokens.indices.to_numpy(zero_copy_only=False)]
    per_token = np.frombuffer(_TOKENS.count, np.int64)[numbers]
    first = np.frombuffer(_TOKENS.first, np.int64)[numbers]
    token_starts = np.cumsum(per_token) - per_token
    within = np.arange(int(per_token.sum()), dtype=np.int64) - np.repeat(token_starts, per_token)
    ids = np.frombuffer(_TOKENS.ids, np.uint64)[np.repeat(first, per_token) + within]
    tokens_per_paragraph = pc.list_value_length(split).to_numpy(zero_copy_only=False).astype(np.int64)
    words_before = np.concatenate([[0], np.cumsum(per_token)])
    ends = np.cumsum(tokens_per_paragraph)
    return ids, words_before[ends] - words_before[ends - tokens_per_paragraph]


def _word_ids_by_search(paragraphs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``paragraph_word_ids`` with one boundary search over the paragraphs joined by newlines."""
    from ..text.boundaries import PIECE_OR_NEWLINE

    pieces = pa.array(PIECE_OR_NEWLINE.findall("\n".join(paragraphs)), pa.string())
    newline = pc.equal(pieces, "\n").to_numpy(zero_copy_only=False)
    words = pieces.filter(pa.array(~newline))
    ids = word_hashes(words) if len(words) else np.zeros(0, np.uint64)
    counts = np.bincount(np.cumsum(newline)[~newline], minlength=len(paragraphs)).astype(np.int64)
    return ids, counts


def _word_hash(word: str) -> int:
    """``_hash`` of ``word``, remembered for the first ``KNOWN_WORDS`` words."""
    known = _KNOWN.get(word)
    if known is None:
        known = _hash(word)
        if len(_KNOWN) < KNOWN_WORDS:
            _KNOWN[word] = known
    return known


def words(texts: pa.Array, segmenters: Sequence[tuple[str, str]] | None = None) -> tuple[pa.Array, np.ndarray]:
    """The words of every simplified text and, for each, its text's index.

    ``segmenters`` gives each text's segmenter kind and language (``text.segmenters``, as
    the quality filters split them); None, or ``spaced``, splits at spaces (the simplified
    text has no punctuation left). Scripts without a segmenter (``none``) count each
    character as a word.
    """
    if segmenters is None or all(kind == SPACED for kind, _ in segmenters):
        # Arrow's whitespace is str.isspace's, so splitting at it finds the words of the
        # simplified text without its whitespace pass, the costliest of the normalisation.
        split = pc.utf8_split_whitespace(fold_diacritics(_unpunctuated(texts)))
        flat = pc.list_flatten(split)
        parents = pc.list_parent_indices(split).to_numpy(zero_copy_only=False)
        keep = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
        return flat.filter(pa.array(keep)), parents[keep]
    split = []
    for text, (kind, language) in zip(simplify(texts).to_pylist(), segmenters):
        if kind == SPACED:
            split.append([word for word in text.split(" ") if word])
        elif kind in SEGMENTERS and kind != NONE:
            split.append([word for word in SEGMENTERS[kind](text, language) if word.strip()])
        else:
            split.append([character for character in text if not character.isspace()])
    counts = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    return pa.array([word for each in split for word in each], pa.string()), np.repeat(np.arange(len(split)), counts)

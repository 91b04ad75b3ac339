"""Per-document text statistics over a whole batch, with pyarrow and numpy.

Items (words, lines, paragraphs) of every document are flattened into one array with, for
each item, the index of its document (``parents``); each function returns one number per
document. Only the word splitting and the greedy duplicate n-gram scan go document by
document, the second only for the documents that repeat an n-gram at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...text.ngrams import NGrams, keys_in_documents
from ...text.segmenters import SEGMENTERS, spaced

# What spaCy's sentencizer takes as the end of a sentence, when a token is made of it.
SENTENCE_ENDS = frozenset("!.?։؟۔܀܁܂߹।॥၊။።፧፨᙮᜵᜶᠃᠉᥄᥅᪨᪩᪪᪫᭚᭛᭞᭟᰻᰼᱾᱿‼‽⁇⁈⁉⸮⸼꓿꘎꘏꛳꛷꡶꡷꣎꣏꤯꧈꧉꩝꩞꩟꫰꫱꯫﹒﹖﹗！．？｡。")


def split_words(texts: Sequence[str], codes: Sequence[str], kinds: Sequence[str]) -> list[list[str]]:
    """The words of every document, split by its language's segmenter (``kinds``)."""
    return [SEGMENTERS[kind](text, code) if text else [] for text, code, kind in zip(texts, codes, kinds)]


def flatten_words(split: Sequence[Sequence[str]]) -> tuple[pa.Array, np.ndarray]:
    """Split words as one flat array, and each word's document."""
    counts = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    flat = [word for words in split for word in words]
    return pa.array(flat, pa.string()), np.repeat(np.arange(len(split)), counts)


def per_document(parents: np.ndarray, values, documents: int) -> np.ndarray:
    weights = None if values is None else np.asarray(values, dtype=np.float64)
    return np.bincount(parents, weights=weights, minlength=documents).astype(np.float64)


def ratio(numerator: np.ndarray, denominator: np.ndarray, empty: float = 0.0) -> np.ndarray:
    out = np.full(np.shape(numerator), empty, dtype=np.float64)
    return np.divide(numerator, denominator, out=out, where=denominator > 0)


def _repeats(keys: np.ndarray) -> np.ndarray:
    """For each position, whether an equal key occurs at an earlier position."""
    repeat = np.ones(len(keys), dtype=bool)
    if len(keys):
        repeat[np.unique(keys, return_index=True)[1]] = False
    return repeat


def duplicate_elements(pieces: pa.ListArray, documents: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per document: how many pieces repeat an earlier one, how many pieces, and the
    characters of the repeats (Gopher's duplicate lines and paragraphs)."""
    pieces = pieces.combine_chunks() if isinstance(pieces, pa.ChunkedArray) else pieces
    items, parents = pc.list_flatten(pieces), pc.list_parent_indices(pieces).to_numpy(zero_copy_only=False)
    if len(items) == 0:
        zero = np.zeros(documents)
        return zero, zero, zero
    ids = pc.dictionary_encode(items).indices.to_numpy(zero_copy_only=False)
    repeat = _repeats(keys_in_documents(ids, parents))
    lengths = pc.utf8_length(items).to_numpy(zero_copy_only=False).astype(np.float64)
    return (per_document(parents, repeat, documents), per_document(parents, None, documents),
            per_document(parents, lengths * repeat, documents))


def most_frequent_ngram_chars(grams: NGrams, parents: np.ndarray, documents: int, n: int) -> np.ndarray:
    """Per document: the characters of its most frequent n-gram (words joined by single
    spaces; the earliest among equally frequent ones) times its count."""
    best = np.zeros(documents)
    if len(grams.keys) == 0:
        return best
    keyed = keys_in_documents(grams.keys, grams.parents)
    _, first, counts = np.unique(keyed, return_index=True, return_counts=True)
    documents_of = grams.parents[first]
    # One number per n-gram that orders by count, then by earliness: the document's maximum
    # is its most frequent n-gram, the earliest of equally frequent ones.
    rank = (counts.astype(np.int64) << 40) | ((1 << 40) - 1 - grams.starts[first].astype(np.int64))
    leader_rank = np.full(documents, -1, dtype=np.int64)
    np.maximum.at(leader_rank, documents_of, rank)
    leaders = first[rank == leader_rank[documents_of]]
    leader_documents = grams.parents[leaders]
    leader_counts = leader_rank[leader_documents] >> 40
    best[leader_documents] = (grams.chars[leaders] + (n - 1)) * leader_counts
    return best


def greedy_duplicate_chars(grams: NGrams, parents: np.ndarray, documents: int, n: int) -> np.ndarray:
    """Per document: the characters of duplicate n-grams as the reference counts them.

    Scanning left to right, an n-gram seen before adds its characters and the scan jumps
    past it; any other is remembered and the scan moves one word. Only documents with a
    repeated n-gram can count anything, so only they are scanned.
    """
    found = np.zeros(documents)
    if len(grams.keys) == 0:
        return found
    keyed = keys_in_documents(grams.keys, grams.parents)
    _, inverse, counts = np.unique(keyed, return_inverse=True, return_counts=True)
    # An n-gram that occurs once in its document is never found in the scan's memory, so
    # the scan steps over it; only the positions of n-grams that occur again need a look.
    candidates = np.flatnonzero(counts[inverse] > 1)
    if len(candidates) == 0:
        return found
    documents_of = grams.parents[candidates]
    bounds = np.flatnonzero(np.diff(documents_of)) + 1
    keys, positions, chars = keyed[candidates].tolist(), grams.starts[candidates].tolist(), grams.chars[candidates].tolist()
    for start, stop in zip([0, *bounds.tolist()], [*bounds.tolist(), len(candidates)]):
        seen: set[int] = set()
        total, reached = 0.0, -1
        for index in range(start, stop):
            position = positions[index]
            if position < reached:
                continue
            key = keys[index]
            if key in seen:
                total += chars[index]
                reached = position + n
            else:
                seen.add(key)
                reached = position + 1
        found[int(documents_of[start])] = total
    return found


def sentences_in(line: str, language: str) -> int:
    """Sentences of a line as spaCy's sentencizer counts them on the line's words: a new
    sentence starts at the first word that is not punctuation after a sentence end."""
    seen_end, sentences = False, 1
    for word in spaced(line, language):
        if word in SENTENCE_ENDS:
            seen_end = True
        elif seen_end and not _punctuation(word):
            sentences += 1
            seen_end = False
    return sentences


def has_sentences(lines: Sequence[str], language: str, minimum: int) -> bool:
    """Whether the lines hold at least ``minimum`` sentences (counting stops there)."""
    found = 0
    for line in lines:
        found += sentences_in(line, language)
        if found >= minimum:
            return True
    return minimum <= 0


def _punctuation(word: str) -> bool:
    import unicodedata

    return all(unicodedata.category(ch).startswith("P") for ch in word)

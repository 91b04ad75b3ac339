"""Per-document text statistics, vectorised over a whole batch with pyarrow and numpy.

Each function takes one list per document (lines, paragraphs or words) flattened into a
single array with the index of the document each item belongs to, and returns one number
per document. Nothing loops over documents in Python.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def flatten(lists: pa.ListArray) -> tuple[pa.Array, np.ndarray]:
    """The items of every list, and for each item the index of its document."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    return pc.list_flatten(lists), pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)


def per_document(parents: np.ndarray, values, documents: int) -> np.ndarray:
    weights = None if values is None else np.asarray(values, dtype=np.float64)
    return np.bincount(parents, weights=weights, minlength=documents).astype(np.float64)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return np.divide(numerator, denominator, out=np.zeros_like(numerator, dtype=np.float64), where=denominator > 0)


def nonempty_pieces(text: pa.ChunkedArray, pattern: str) -> pa.ListArray:
    """``text`` split by the regex ``pattern``, each piece stripped, empty pieces dropped."""
    pieces = pc.split_pattern_regex(text, pattern)
    items, parents = flatten(pa.chunked_array(pieces).combine_chunks())
    items = pc.utf8_trim_whitespace(items)
    keep = pc.greater(pc.utf8_length(items), 0).to_numpy(zero_copy_only=False)
    return regroup(items.filter(pa.array(keep)), parents[keep], len(text))


def regroup(items: pa.Array, parents: np.ndarray, documents: int) -> pa.ListArray:
    """Items back into one list per document (``parents`` sorted, as ``flatten`` gives them)."""
    counts = np.bincount(parents, minlength=documents) if len(parents) else np.zeros(documents, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), items)


def _occurrences(parents: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every item, how often an equal key occurs in the same document, and its group id.

    (document, key) pairs are folded into one 64-bit number, so grouping is one sort.
    """
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore"):
        combined = keys.astype(np.uint64) * _MULTIPLIER + parents.astype(np.uint64)
    _, ids, counts = np.unique(combined, return_inverse=True, return_counts=True)
    return counts[ids], ids


def item_ids(items: pa.Array) -> np.ndarray:
    """Equal strings get equal integer ids (dictionary encoding): grouping is then numeric."""
    if len(items) == 0:
        return np.zeros(0, dtype=np.int64)
    return pc.dictionary_encode(items).indices.to_numpy(zero_copy_only=False).astype(np.int64)


def duplicate_fractions(items: pa.Array, parents: np.ndarray, documents: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document: the fraction of items that repeat an earlier one, and the fraction of
    characters in those repeats (Gopher's duplicate line and paragraph rules)."""
    lengths = pc.utf8_length(items).to_numpy(zero_copy_only=False).astype(np.float64)
    occurrences, ids = _occurrences(parents, item_ids(items))
    repeat = np.zeros(len(ids), dtype=bool)
    if len(ids):
        _, first = np.unique(ids, return_index=True)
        repeat[:] = True
        repeat[first] = False
    total_items = per_document(parents, None, documents)
    total_chars = per_document(parents, lengths, documents)
    return (ratio(per_document(parents, repeat, documents), total_items),
            ratio(per_document(parents, lengths * repeat, documents), total_chars))


def _ngrams(ids: np.ndarray, lengths: np.ndarray, parents: np.ndarray, n: int):
    """Every word n-gram that stays inside one document, as a 64-bit key (a polynomial hash
    of its word ids; a collision merely merges two n-grams), with its document, its first
    word and its characters."""
    count = len(ids) - n + 1
    if count <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty.astype(np.uint64), empty, empty, empty.astype(np.float64)
    keys = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            keys = keys * _MULTIPLIER + ids[k:k + count].astype(np.uint64) + np.uint64(1)
    cumulative = np.concatenate([[0.0], np.cumsum(lengths)])
    chars = cumulative[n:n + count] - cumulative[:count]
    inside = parents[:count] == parents[n - 1:n - 1 + count]
    starts = np.arange(count)
    return keys[inside], parents[:count][inside], starts[inside], chars[inside]


def top_ngram_fraction(ids: np.ndarray, lengths: np.ndarray, parents: np.ndarray, documents: int, n: int,
                       word_chars: np.ndarray) -> np.ndarray:
    """Characters (of words) in all occurrences of each document's most frequent repeated
    n-gram, over all its word characters."""
    keys, gram_parents, _, chars = _ngrams(ids, lengths, parents, n)
    if len(keys) == 0:
        return np.zeros(documents)
    occurrences, _ = _occurrences(gram_parents, keys)
    best = np.zeros(documents)
    np.maximum.at(best, gram_parents, np.where(occurrences > 1, chars * occurrences, 0.0))
    return ratio(best, word_chars)


def duplicate_ngram_fraction(ids: np.ndarray, lengths: np.ndarray, parents: np.ndarray, documents: int, n: int,
                             word_chars: np.ndarray) -> np.ndarray:
    """Characters of the words covered by any n-gram occurring more than once in the
    document, each word counted once, over all its word characters."""
    keys, gram_parents, starts, _ = _ngrams(ids, lengths, parents, n)
    if len(keys) == 0:
        return np.zeros(documents)
    occurrences, _ = _occurrences(gram_parents, keys)
    repeated = starts[occurrences > 1]
    cover = np.zeros(len(ids) + 1, dtype=np.int64)
    np.add.at(cover, repeated, 1)
    np.add.at(cover, repeated + n, -1)
    covered = np.cumsum(cover)[:-1] > 0
    return ratio(per_document(parents, lengths * covered, documents), word_chars)

"""Per-document text statistics over a whole batch, with pyarrow and numpy.

Items (words, lines, paragraphs) of every document are flattened into one array with, for
each item, the index of its document (``parents``); each function returns one number per
document. Only the splitting of a distinct chunk into words (or of a whole document, for
Japanese and Chinese) and the greedy duplicate n-gram scan run in Python, the scan only
over the n-grams a document repeats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...text.ngrams import NGrams, keys_at, keys_in_documents
from ...text.segmenters import SEGMENTERS, chunk_words, spaced

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


def batch_words(text: pa.Array | pa.ChunkedArray, codes: Sequence[str],
                kinds: Sequence[str]) -> tuple[pa.Array, np.ndarray]:
    """The words of every document (split as ``split_words`` splits them) as one flat array
    in document order, and each word's document.

    Documents of languages written with spaces are cut at whitespace by Arrow, and each
    distinct chunk of the batch is split once: chunks repeat ("the", "said,"), so the words
    of a batch cost a fraction of a Python call each, where document by document they cost
    one or more (a third of the Gopher rules' time).
    """
    positions = np.arange(len(codes))
    parts = []
    for code in sorted({code for code, kind in zip(codes, kinds) if kind == "spaced"}):
        chosen = positions[[c == code and k == "spaced" for c, k in zip(codes, kinds)]]
        words, parents = _spaced_words(text.take(pa.array(chosen)), code)
        parts.append((words, chosen[parents]))
    others = positions[[kind != "spaced" for kind in kinds]]
    if len(others):
        picked = text.take(pa.array(others)).to_pylist()
        words, parents = flatten_words(split_words(picked, [codes[i] for i in others], [kinds[i] for i in others]))
        parts.append((words, others[parents]))
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return pa.array([], pa.string()), np.zeros(0, dtype=np.int64)
    parents = np.concatenate([parents for _, parents in parts])
    order = np.argsort(parents, kind="stable")
    return pa.concat_arrays([words for words, _ in parts]).take(pa.array(order)), parents[order]


def _spaced_words(text: pa.Array | pa.ChunkedArray, language: str) -> tuple[pa.Array, np.ndarray]:
    chunks = pc.utf8_split_whitespace(text)  # where str.split() cuts, for every code point
    chunks = chunks.combine_chunks() if isinstance(chunks, pa.ChunkedArray) else chunks
    flat = pc.list_flatten(chunks)
    parents = pc.list_parent_indices(chunks).to_numpy(zero_copy_only=False)
    filled = pc.greater(pc.binary_length(flat), 0)  # whitespace at either end leaves an empty chunk
    flat, parents = flat.filter(filled), parents[filled.to_numpy(zero_copy_only=False)]
    encoded = pc.dictionary_encode(flat)
    pieces = chunk_words(encoded.dictionary.to_pylist(), language)
    counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    words = pa.array([word for chunk in pieces for word in chunk], pa.string())
    ids = encoded.indices.to_numpy(zero_copy_only=False)
    per_chunk = counts[ids]
    chunk_of = np.repeat(np.arange(len(ids)), per_chunk)
    within = np.arange(len(chunk_of)) - np.repeat(np.cumsum(per_chunk) - per_chunk, per_chunk)
    first_word = np.cumsum(counts) - counts
    return words.take(pa.array(first_word[ids][chunk_of] + within)), parents[chunk_of]


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


class RepeatedNGrams:
    """The word n-grams each document of a batch repeats, for n in increasing order.

    An n-gram that occurs twice in a document is made of shorter n-grams that all occur
    twice too, so after the first n only the positions where every shorter one repeats are
    hashed and counted: a few in a hundred words, where counting every n-gram of every
    document for each n cost most of the Gopher rules' time.
    """

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, parents: np.ndarray):
        self.ids, self.parents = ids.astype(np.uint64), parents
        self.cumulative = np.concatenate([[0.0], np.cumsum(lengths)])
        self._n, self._repeated = 0, np.zeros(0, dtype=bool)

    def of_size(self, n: int) -> tuple[NGrams, np.ndarray]:
        """Every occurrence, in text order, of the n-grams that occur more than once in their
        document, and how often each occurs there."""
        count = len(self.ids) - n + 1
        if count <= 0:
            empty = np.zeros(0, dtype=np.int64)
            return NGrams(empty.astype(np.uint64), empty, empty, empty.astype(np.float64)), empty
        if self._n and self._n <= n:
            span = n - self._n + 1  # the shorter n-grams at these many positions from here must repeat
            repeating = np.concatenate([[0], np.cumsum(self._repeated)])
            positions = np.flatnonzero(repeating[span:span + count] - repeating[:count] == span)
        else:
            positions = np.arange(count)
        positions = positions[self.parents[positions] == self.parents[positions + n - 1]]
        keys = keys_at(self.ids, positions, n)
        _, inverse, counts = np.unique(keys_in_documents(keys, self.parents[positions]), return_inverse=True,
                                       return_counts=True)
        occurrences = counts[inverse]
        repeated = occurrences > 1
        positions = positions[repeated]
        self._n, self._repeated = n, np.zeros(len(self.ids), dtype=bool)
        self._repeated[positions] = True
        chars = self.cumulative[positions + n] - self.cumulative[positions]
        return NGrams(keys[repeated], self.parents[positions], positions, chars), occurrences[repeated]

    def first_chars(self, documents: int, n: int) -> np.ndarray:
        """Per document: the characters of its first n-gram (0 for fewer than n words)."""
        words = np.bincount(self.parents, minlength=documents)
        first = np.concatenate([[0], np.cumsum(words)[:-1]])
        long_enough = words >= n
        chars = np.zeros(documents)
        starts = first[long_enough]
        chars[long_enough] = self.cumulative[starts + n] - self.cumulative[starts] + (n - 1)
        return chars


def most_frequent_ngram_chars(repeats: RepeatedNGrams, documents: int, n: int) -> np.ndarray:
    """Per document: the characters of its most frequent n-gram (words joined by single
    spaces; the earliest among equally frequent ones) times its count."""
    best = repeats.first_chars(documents, n)  # no n-gram repeats: each occurs once, the first leads
    grams, occurrences = repeats.of_size(n)
    if len(grams.keys) == 0:
        return best
    # One number per occurrence that orders by count, then by earliness: a document's maximum
    # is the first occurrence of its most frequent n-gram, the earliest of equally frequent ones.
    rank = (occurrences.astype(np.int64) << 40) | ((1 << 40) - 1 - grams.starts.astype(np.int64))
    leader_rank = np.full(documents, -1, dtype=np.int64)
    np.maximum.at(leader_rank, grams.parents, rank)
    leaders = np.flatnonzero(rank == leader_rank[grams.parents])
    best[grams.parents[leaders]] = (grams.chars[leaders] + (n - 1)) * occurrences[leaders]
    return best


def greedy_duplicate_chars(repeats: RepeatedNGrams, documents: int, n: int) -> np.ndarray:
    """Per document: the characters of duplicate n-grams as the reference counts them.

    Scanning left to right, an n-gram seen before adds its characters and the scan jumps
    past it; any other is remembered and the scan moves one word. An n-gram that occurs once
    is never found in the scan's memory, so the scan steps over it: only the occurrences of
    repeated n-grams need a look, and only documents that have them are scanned.
    """
    found = np.zeros(documents)
    grams, _ = repeats.of_size(n)
    if len(grams.keys) == 0:
        return found
    bounds = np.flatnonzero(np.diff(grams.parents)) + 1
    keys, positions, chars = grams.keys.tolist(), grams.starts.tolist(), grams.chars.tolist()
    for start, stop in zip([0, *bounds.tolist()], [*bounds.tolist(), len(keys)]):
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
        found[int(grams.parents[start])] = total
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

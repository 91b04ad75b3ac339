"""MinHash signatures of documents and their LSH band keys, vectorised over a batch.

The defaults are FineWeb's: word 5-grams over simplified text (lower case, numbers as 0,
punctuation as spaces, whitespace collapsed, diacritics removed), 14 bands of 8 hashes,
64-bit values, a fixed seed. Words are split as FineWeb-2 splits them, by each document's
language: at spaces, or by SudachiPy (Japanese) and jieba (Chinese), as the quality
filters do. Two documents whose 5-gram sets have Jaccard similarity J
share at least one band with probability 1 - (1 - J^8)^14: 0.9996 at J = 0.9, 0.5 at
J = 0.72, 0.05 at J = 0.5.

Everything here is stable across processes and runs: word hashes are BLAKE2b digests (not
Python's salted ``hash``), and the hash parameters come from the seed alone, so a
signature computed by one element matches the same text's signature anywhere else.

Each of the hash functions is ``a * x + b`` modulo 2^32 with an odd ``a``, of the low 32 bits
of a shingle's key (well mixed already): a permutation of those values, so its minimum is a
MinHash value. The arithmetic wraps in numpy's uint32 for free, and 32-bit values halve the
memory the hash matrix moves: with 64-bit values and a reduction modulo a prime, as an
earlier release had them, the signatures took 40% longer, for no better decision
(docs/dedup.md: recall and agreement with datatrove measured on both). datatrove's values are
32-bit too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..text.ngrams import distinct, ngram_keys
from .settings import MinHashSettings
from .words import fold_diacritics, simplify, word_hashes, words  # noqa: F401 (dedup's API)

EMPTY = np.uint32((1 << 32) - 1)  # an empty text's values: larger than any hash
SHINGLES_PER_STEP = 1 << 11  # shingles hashed at once: 112 hashes of 4 bytes each, under 1 MB, in a core's L2


def hash_parameters(settings: MinHashSettings) -> tuple[np.ndarray, np.ndarray]:
    """The a (odd) and b of every hash function ``a * x + b mod 2^32``, from the seed alone."""
    generator = np.random.RandomState(settings.seed)
    return (generator.randint(0, 1 << 32, size=settings.hashes, dtype=np.uint32) | np.uint32(1),
            generator.randint(0, 1 << 32, size=settings.hashes, dtype=np.uint32))


def shingles(texts: pa.Array, settings: MinHashSettings = MinHashSettings(),
             segmenters: Sequence[tuple[str, str]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every text's word n-gram hashes and, for each, its text's index, ordered by text (a
    text with fewer words than an n-gram is one shingle of all its words)."""
    documents = len(texts)
    flat, parents = words(texts, segmenters)
    hashes = word_hashes(flat)
    counts = np.bincount(parents, minlength=documents)
    n = settings.ngram
    grams = ngram_keys(hashes, np.ones(len(hashes)), parents, n)
    short = np.flatnonzero((counts > 0) & (counts < n))
    values, owners = grams.keys, grams.parents
    if len(short):  # one shingle of all the words
        whole = [ngram_keys(hashes[parents == d], np.ones(counts[d]), np.zeros(counts[d], np.int64), counts[d])
                 .keys[0] for d in short]
        values = np.concatenate([values, np.array(whole, dtype=np.uint64)])
        owners = np.concatenate([owners, short])
    order = np.argsort(owners, kind="stable")
    return values[order], owners[order]


def jaccard(first: np.ndarray, second: np.ndarray, *, distinct_already: bool = False) -> float:
    """The Jaccard similarity of two shingle arrays (as sets); ``distinct_already``: each holds
    every value once (``text.ngrams.distinct``), as when one array meets many others."""
    one, other = (first, second) if distinct_already else (distinct(first), distinct(second))
    common = len(np.intersect1d(one, other, assume_unique=True))
    union = len(one) + len(other) - common
    return common / union if union else 1.0


def signatures(texts: pa.Array, settings: MinHashSettings = MinHashSettings(),
               segmenters: Sequence[tuple[str, str]] | None = None) -> np.ndarray:
    """One row of ``settings.hashes`` MinHash values per text (an empty text gets the largest values)."""
    documents = len(texts)
    hashed, owners = shingles(texts, settings, segmenters)
    result = np.full((documents, settings.hashes), EMPTY, dtype=np.uint32)
    if len(hashed) == 0:
        return result
    present, starts = np.unique(owners, return_index=True)
    a, b = hash_parameters(settings)
    hashed = hashed.astype(np.uint32)
    # Documents in steps of about SHINGLES_PER_STEP shingles (a longer one alone), every hash
    # at once: the hash matrix stays in a core's cache however long the batch's documents are.
    firsts = np.flatnonzero(np.diff(starts // SHINGLES_PER_STEP, prepend=-1))
    edges = np.append(firsts, len(present))
    ends = np.append(starts[1:], len(hashed))
    with np.errstate(over="ignore"):
        for low, high in zip(edges[:-1], edges[1:]):
            chunk, local = hashed[starts[low]:ends[high - 1]], starts[low:high] - starts[low]
            values = np.multiply.outer(chunk, a)
            values += b
            result[present[low:high]] = np.minimum.reduceat(values, local, axis=0)
    return result


def text_keys(texts: pa.Array) -> np.ndarray:
    """One stable 64-bit key per text: equal for texts equal after ``simplify`` (exact dedup)."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
                        for t in simplify(texts).to_pylist()), dtype=np.uint64, count=len(texts))


def band_keys(signature_rows: np.ndarray, settings: MinHashSettings = MinHashSettings()) -> np.ndarray:
    """One 64-bit key per document and band: documents sharing a band's values share its key."""
    rows = signature_rows.reshape(len(signature_rows), settings.bands, settings.rows)
    keys = np.zeros(rows.shape[:2], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for row in range(settings.rows):
            keys = keys * np.uint64(0x9E3779B97F4A7C15) + rows[:, :, row] + np.uint64(1)
    return keys

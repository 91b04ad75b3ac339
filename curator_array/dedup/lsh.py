"""Locality-sensitive hashing of texts: the band keys of documents, and candidate pairs
confirmed by their true similarity (the pairs themselves: ``candidates``).

Each function takes one batch or one bucket at a time; which files they come from and go
to is the phases' business (``run.phases``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..text.ngrams import distinct
from .bandfile import BandRows
from .minhash import band_keys, jaccard, shingles, signatures, simplify, text_keys
from .settings import MinHashSettings

BATCH = 1000  # documents per signature batch: bounds the hash matrix to about 100 MB


def signature_rows(ids: np.ndarray, texts: pa.Array, settings: MinHashSettings | None,
                   segmenters: Sequence[tuple[str, str]] | None = None) -> BandRows:
    """The band keys of ``texts`` (``settings`` None: exact dedup, one key of the whole text),
    their words split by ``segmenters`` (``minhash.words``); ``ids`` are the documents'
    identities (``keys``)."""
    ids = np.asarray(ids, dtype=np.uint64)
    if settings is None:
        return BandRows(ids, np.zeros(len(ids), np.int16), text_keys(texts))
    parts = []
    for start in range(0, len(ids), BATCH):
        chunk = texts.slice(start, BATCH)
        split = segmenters[start:start + BATCH] if segmenters is not None else None
        parts.append(band_keys(signatures(chunk, settings, split), settings).reshape(-1))
    return BandRows(np.repeat(ids, settings.bands), np.tile(np.arange(settings.bands, dtype=np.int16), len(ids)),
                    np.concatenate(parts) if parts else np.empty(0, np.uint64))


def batch_signature_rows(batch: tuple[np.ndarray, pa.Array, Sequence[tuple[str, str]] | None],
                         settings: MinHashSettings | None) -> BandRows:
    """``signature_rows`` of one ``(ids, texts, segmenters)`` batch (what a worker process is handed)."""
    ids, texts, segmenters = batch
    return signature_rows(ids, texts, settings, segmenters)


def confirmed_pairs(first: np.ndarray, second: np.ndarray,
                    texts_of: Callable[[list[int]], Mapping[int, tuple[str, tuple[str, str]]]],
                    threshold: float, settings: MinHashSettings | None) -> tuple[np.ndarray, np.ndarray]:
    """The pairs whose true Jaccard similarity of shingles reaches ``threshold`` (``settings``
    None, exact dedup: whose normalised texts are equal, so no hash collision removes one).

    ``texts_of`` returns the text and segmenter of each key it can read; a pair with a key it
    cannot (an earlier run's document, whose text is not reread) is kept as the signatures
    found it.
    """
    firsts, seconds = first.tolist(), second.tolist()  # identities
    wanted = sorted(set(firsts) | set(seconds))
    texts = texts_of(wanted)
    known = [k for k in wanted if k in texts]
    if settings is None:
        normalised = dict(zip(known, simplify(pa.array([texts[k][0] for k in known], pa.string())).to_pylist()))
        keep = np.array([a not in normalised or b not in normalised or normalised[a] == normalised[b]
                         for a, b in zip(firsts, seconds)], dtype=bool)
        return first[keep], second[keep]
    values, owners = shingles(pa.array([texts[k][0] for k in known], pa.string()), settings,
                              [texts[k][1] for k in known])
    bounds = np.searchsorted(owners, np.arange(len(known) + 1))
    sets = {key: distinct(values[bounds[i]:bounds[i + 1]]) for i, key in enumerate(known)}
    keep = np.array([a not in sets or b not in sets or jaccard(sets[a], sets[b], distinct_already=True) >= threshold
                     for a, b in zip(firsts, seconds)], dtype=bool)
    return first[keep], second[keep]

"""Locality-sensitive hashing over tables: band keys of documents, candidate pairs, and
pairs confirmed by their true similarity.

Each function takes and returns Arrow tables, one batch or one bucket at a time; which
files they come from and go to is the phases' business (``run.phases``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from .minhash import band_keys, jaccard, shingles, signatures, simplify, text_keys
from .settings import MinHashSettings

BATCH = 1000  # documents per signature batch: bounds the hash matrix to about 100 MB
SIGNATURE_SCHEMA = pa.schema([("id", pa.uint64()), ("band", pa.int16()), ("band_key", pa.uint64())])
PAIR_SCHEMA = pa.schema([("first", pa.uint64()), ("second", pa.uint64())])


def signature_rows(ids: np.ndarray, texts: pa.Array, settings: MinHashSettings | None,
                   segmenters: Sequence[tuple[str, str]] | None = None) -> pa.Table:
    """The band keys of ``texts`` (``settings`` None: exact dedup, one key of the whole text),
    their words split by ``segmenters`` (``minhash.words``); ``ids`` are the documents'
    identities (``keys``)."""
    if settings is None:
        return pa.table({"id": pa.array(ids, pa.uint64()), "band": pa.array(np.zeros(len(ids), np.int16)),
                         "band_key": pa.array(text_keys(texts))}, schema=SIGNATURE_SCHEMA)
    parts = []
    for start in range(0, len(ids), BATCH):
        chunk = texts.slice(start, BATCH)
        split = segmenters[start:start + BATCH] if segmenters is not None else None
        bands = band_keys(signatures(chunk, settings, split), settings)
        parts.append(pa.table({"id": pa.array(np.repeat(ids[start:start + len(chunk)], settings.bands)),
                               "band": pa.array(np.tile(np.arange(settings.bands, dtype=np.int16), len(chunk))),
                               "band_key": pa.array(bands.reshape(-1))}, schema=SIGNATURE_SCHEMA))
    return pa.concat_tables(parts) if parts else SIGNATURE_SCHEMA.empty_table()


def candidate_pairs(table: pa.Table) -> pa.Table:
    """Each document paired with the smallest identity that shares one of its band keys, once.

    A band at a time: the sort's temporaries are one band's share of the rows, not all of them."""
    if table.num_rows == 0:
        return PAIR_SCHEMA.empty_table()
    ids, band, band_key = (table[name].to_numpy() for name in ("id", "band", "band_key"))
    firsts, seconds = [], []
    for each in np.unique(band):
        rows = np.flatnonzero(band == each)
        keys, members = band_key[rows], ids[rows]
        order = np.lexsort((members, keys))
        keys, members = keys[order], members[order]
        starts = np.ones(len(keys), dtype=bool)
        starts[1:] = keys[1:] != keys[:-1]
        first = members[np.maximum.accumulate(np.where(starts, np.arange(len(keys)), 0))]
        paired = first != members
        firsts.append(first[paired])
        seconds.append(members[paired])
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    order = np.lexsort((second, first))
    first, second = first[order], second[order]
    distinct = np.ones(len(first), dtype=bool)
    distinct[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    return pa.table({"first": first[distinct], "second": second[distinct]}, schema=PAIR_SCHEMA)


def confirmed_pairs(pairs: pa.Table, texts_of: Callable[[list[str]], Mapping[str, tuple[str, tuple[str, str]]]],
                    threshold: float, settings: MinHashSettings | None) -> pa.Table:
    """The pairs whose true Jaccard similarity of shingles reaches ``threshold`` (``settings``
    None, exact dedup: whose normalised texts are equal, so no hash collision removes one).

    ``texts_of`` returns the text and segmenter of each key it can read; a pair with a key it
    cannot (an earlier run's document, whose text is not reread) is kept as the signatures
    found it.
    """
    firsts, seconds = pairs["first"].to_pylist(), pairs["second"].to_pylist()  # identities
    wanted = sorted(set(firsts) | set(seconds))
    texts = texts_of(wanted)
    known = [k for k in wanted if k in texts]
    if settings is None:
        normalised = dict(zip(known, simplify(pa.array([texts[k][0] for k in known], pa.string())).to_pylist()))
        keep = [a not in normalised or b not in normalised or normalised[a] == normalised[b]
                for a, b in zip(firsts, seconds)]
        return pairs.filter(pa.array(keep, pa.bool_()))
    values, owners = shingles(pa.array([texts[k][0] for k in known], pa.string()), settings,
                              [texts[k][1] for k in known])
    bounds = np.searchsorted(owners, np.arange(len(known) + 1))
    sets = {key: values[bounds[i]:bounds[i + 1]] for i, key in enumerate(known)}
    keep = [a not in sets or b not in sets or jaccard(sets[a], sets[b]) >= threshold for a, b in zip(firsts, seconds)]
    return pairs.filter(pa.array(keep, pa.bool_()))

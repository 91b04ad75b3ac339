"""The dedup phases' work on files, each phase's memory bounded by its own share.

1. ``write_signatures``: one curation shard's documents → their band keys (a Parquet file
   of ``key``, ``band``, ``band_key``; written atomically, named by the caller).
2. ``write_bucket_pairs``: every shard's signature files, but only the band keys with
   ``band_key % buckets == bucket`` → the candidate pairs of that bucket (each document
   paired with the smallest key sharing its band key). Memory: one shard's signature file
   at a time (14 rows of about 40 bytes per document) plus this bucket's share of all.
3. ``removed_keys``: every bucket's pairs → the keys to remove (``clusters``).

Document keys are strings that must be stable across runs and shardings (the run uses
``relative/output/path#row``); the copy kept is the smallest key of its cluster, so the
answer is the same however the documents were spread over shards and buckets.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.atomic import fsync_directory, temporary_sibling
from .clusters import DuplicateClusters
from .minhash import MinHashSettings, band_keys, signatures

BATCH = 1000  # documents per signature batch: bounds the hash matrix to about 100 MB


def _write_atomically(table: pa.Table, path: Path) -> None:
    """Complete and synced before its name appears: a killed phase leaves nothing half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = temporary_sibling(path)
    pq.write_table(table, partial)
    with open(partial, "rb+") as handle:
        os.fsync(handle.fileno())
    partial.replace(path)
    fsync_directory(path.parent)


def write_signatures(keys: Sequence[str], texts: pa.Array, path: Path,
                     settings: MinHashSettings = MinHashSettings()) -> int:
    """The band keys of every document; returns how many rows were written."""
    parts = []
    for start in range(0, len(keys), BATCH):
        chunk = texts.slice(start, BATCH)
        bands = band_keys(signatures(chunk, settings), settings)
        documents = np.repeat(np.arange(start, start + len(chunk)), settings.bands)
        parts.append(pa.table({"key": pa.array(keys).take(pa.array(documents)),
                               "band": pa.array(np.tile(np.arange(settings.bands, dtype=np.int16), len(chunk))),
                               "band_key": pa.array(bands.reshape(-1))}))
    table = pa.concat_tables(parts) if parts else pa.table(
        {"key": pa.array([], pa.string()), "band": pa.array([], pa.int16()), "band_key": pa.array([], pa.uint64())})
    _write_atomically(table, path)
    return table.num_rows


def write_bucket_pairs(signature_files: Iterable[Path], bucket: int, buckets: int, path: Path) -> int:
    """The candidate pairs of one bucket; returns how many pairs were written."""
    mine = []
    for file in signature_files:
        table = pq.read_table(file)
        owned = (table["band_key"].to_numpy() % np.uint64(buckets)) == np.uint64(bucket)
        mine.append(table.filter(pa.array(owned)))
    pairs = {"first": pa.array([], pa.string()), "second": pa.array([], pa.string())}
    if mine:
        table = pa.concat_tables(mine)
        grouped = table.group_by(["band", "band_key"]).aggregate([("key", "min"), ("key", "count_distinct")])
        shared = grouped.filter(pc.greater(grouped["key_count_distinct"], 1))
        joined = table.join(shared.select(["band", "band_key", "key_min"]), ["band", "band_key"], join_type="inner")
        joined = joined.filter(pc.not_equal(joined["key"], joined["key_min"]))
        unique = joined.group_by(["key_min", "key"]).aggregate([])
        pairs = {"first": unique["key_min"], "second": unique["key"]}
    table = pa.table(pairs)
    _write_atomically(table, path)
    return table.num_rows


def removed_keys(pair_files: Iterable[Path]) -> tuple[set[str], dict[int, int]]:
    """The keys to remove, and how many clusters have each size."""
    clusters = DuplicateClusters()
    for file in pair_files:
        table = pq.read_table(file)
        clusters.join_all(zip(table["first"].to_pylist(), table["second"].to_pylist()))
    return clusters.removed(), clusters.sizes()

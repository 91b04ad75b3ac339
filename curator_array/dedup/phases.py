"""The dedup phases' work on files, each phase's memory bounded by its own share.

1. ``write_signatures``: one curation shard's documents, file by file → their band keys
   (a Parquet file of ``key``, ``band``, ``band_key``). Memory: one input file.
2. ``write_bucket_pairs``: every shard's signature files, but only the band keys with
   ``band_key % buckets == bucket`` → the candidate pairs of that bucket (each document
   paired with the smallest key sharing its band key). Memory: one signature file at a time
   plus this bucket's share of all (14 rows of about 40 bytes per document, divided by the
   bucket count).
3. ``removed_keys``: every bucket's pairs → the keys to remove (``clusters``).
4. ``copy_without_rows``: one curation output file → the same file without the removed rows,
   byte for byte otherwise (JSON Lines) or with the same schema (Parquet).

Document keys are strings that must be stable across runs and shardings (``document_key``:
``relative/output/path#row``); the copy kept is the smallest key of its cluster, so the
answer is the same however the documents were spread over shards and buckets. Every file
is written complete and synced before its name appears.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.atomic import replacing
from .clusters import DuplicateClusters
from .minhash import MinHashSettings, band_keys, jaccard, shingles, signatures, simplify, text_keys

BATCH = 1000  # documents per signature batch: bounds the hash matrix to about 100 MB
SIGNATURE_SCHEMA = pa.schema([("key", pa.string()), ("band", pa.int16()), ("band_key", pa.uint64())])
BUCKETED_SCHEMA = SIGNATURE_SCHEMA.append(pa.field("bucket", pa.int32()))
PAIR_SCHEMA = pa.schema([("first", pa.string()), ("second", pa.string())])
FLUSH_ROWS = 1_000_000  # band-key rows a signatures element sorts into bucket row groups at once (~70 MB)
ROW_DIGITS = 10


def document_key(relative_path: str, row: int) -> str:
    """A document's identity: its curation output file and row (zero-padded, so keys sort by row)."""
    return f"{relative_path}#{row:0{ROW_DIGITS}d}"


def split_key(key: str) -> tuple[str, int]:
    path, _, row = key.rpartition("#")
    return path, int(row)


def write_table_atomically(table: pa.Table, path: Path) -> None:
    """Complete and synced before its name appears: a killed phase leaves nothing half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as partial:
        pq.write_table(table, partial)


def signature_rows(keys: list[str], texts: pa.Array, settings: MinHashSettings | None) -> pa.Table:
    """The band keys of ``texts`` (``settings`` None: exact dedup, one key of the whole text)."""
    if settings is None:
        return pa.table({"key": pa.array(keys, pa.string()), "band": pa.array(np.zeros(len(keys), np.int16)),
                         "band_key": pa.array(text_keys(texts))}, schema=SIGNATURE_SCHEMA)
    parts = []
    for start in range(0, len(keys), BATCH):
        chunk = texts.slice(start, BATCH)
        bands = band_keys(signatures(chunk, settings), settings)
        documents = np.repeat(np.arange(start, start + len(chunk)), settings.bands)
        parts.append(pa.table({"key": pa.array(keys, pa.string()).take(pa.array(documents)),
                               "band": pa.array(np.tile(np.arange(settings.bands, dtype=np.int16), len(chunk))),
                               "band_key": pa.array(bands.reshape(-1))}, schema=SIGNATURE_SCHEMA))
    return pa.concat_tables(parts) if parts else SIGNATURE_SCHEMA.empty_table()


def write_signatures(batches: Iterable[tuple[list[str], pa.Array]], path: Path,
                     settings: MinHashSettings | None = MinHashSettings(), buckets: int = 1) -> int:
    """The band keys of every batch's documents, in one file; returns how many documents.

    Rows are written in row groups of one bucket each (``band_key % buckets``, kept in a
    ``bucket`` column), so a bucket element reads its share and skips the rest. At most
    ``FLUSH_ROWS`` rows wait in memory before they are sorted into their row groups.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = BUCKETED_SCHEMA.with_metadata({"buckets": str(buckets)})
    documents, pending = 0, []

    def flush() -> None:
        table = pa.concat_tables(pending)
        pending.clear()
        bucket = (table["band_key"].to_numpy() % np.uint64(buckets)).astype(np.int32)
        order = np.argsort(bucket, kind="stable")
        table = table.take(pa.array(order)).append_column("bucket", pa.array(bucket[order]))
        bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))
        for first, last in zip(bounds[:-1], bounds[1:]):
            if last > first:
                writer.write_table(table.slice(first, last - first).cast(schema))

    with replacing(path) as partial, pq.ParquetWriter(partial, schema) as writer:
        for keys, texts in batches:
            pending.append(signature_rows(keys, texts, settings))
            documents += len(keys)
            if sum(t.num_rows for t in pending) >= FLUSH_ROWS:
                flush()
        if pending:
            flush()
    return documents


def bucket_rows(path: Path, bucket: int, buckets: int) -> pa.Table:
    """The rows of ``bucket`` in one signature file: its row groups alone when the file was
    bucketed the same way, else every row filtered (an earlier run's, with its own count)."""
    metadata = pq.read_schema(path).metadata or {}
    columns = ["key", "band", "band_key"]
    if metadata.get(b"buckets") == str(buckets).encode():
        return pq.read_table(path, columns=columns, filters=[("bucket", "=", bucket)])
    table = pq.read_table(path, columns=columns)
    return table.filter(pa.array((table["band_key"].to_numpy() % np.uint64(buckets)) == np.uint64(bucket)))


def candidate_pairs(table: pa.Table) -> pa.Table:
    """Each document paired with the smallest key that shares one of its band keys, once.

    Keys become their rank among the bucket's distinct keys, so the grouping is a sort of
    integers, not of strings.
    """
    if table.num_rows == 0:
        return PAIR_SCHEMA.empty_table()
    distinct = pc.unique(table["key"].combine_chunks())
    distinct = distinct.take(pc.array_sort_indices(distinct))
    rank = pc.index_in(table["key"], value_set=distinct).to_numpy().astype(np.int64)
    band, band_key = table["band"].to_numpy(), table["band_key"].to_numpy()
    order = np.lexsort((rank, band_key, band))
    band, band_key, rank = band[order], band_key[order], rank[order]
    starts = np.ones(len(rank), dtype=bool)
    starts[1:] = (band[1:] != band[:-1]) | (band_key[1:] != band_key[:-1])
    first = rank[np.maximum.accumulate(np.where(starts, np.arange(len(rank)), 0))]
    paired = np.unique((first << 32 | rank)[first != rank])
    return pa.table({"first": distinct.take(pa.array(paired >> 32)),
                     "second": distinct.take(pa.array(paired & 0xFFFFFFFF))}, schema=PAIR_SCHEMA)


def write_bucket_pairs(signature_files: Iterable[Path | tuple[Path, str]], bucket: int, buckets: int,
                       path: Path) -> tuple[pa.Table, int]:
    """The candidate pairs of one bucket; returns them and how many band keys it held.

    A signature file may come with a key prefix (an earlier run's, for ``--dedup-against``).
    """
    mine = []
    for item in signature_files:
        file, prefix = item if isinstance(item, tuple) else (item, "")
        table = bucket_rows(file, bucket, buckets)
        if prefix:
            table = table.set_column(0, "key", pc.binary_join_element_wise(prefix, table["key"], ""))
        mine.append(table)
    table = pa.concat_tables(mine) if mine else SIGNATURE_SCHEMA.empty_table()
    pairs = candidate_pairs(table)
    write_table_atomically(pairs, path)
    return pairs, table.num_rows


def confirmed_pairs(pairs: pa.Table, texts_of: Callable[[list[str]], Mapping[str, str]], threshold: float,
                    settings: MinHashSettings | None) -> pa.Table:
    """The pairs whose true Jaccard similarity of shingles reaches ``threshold`` (``settings``
    None, exact dedup: whose normalised texts are equal, so no hash collision removes one).

    ``texts_of`` returns the text of each key it can read; a pair with a key it cannot (an
    earlier run's document, whose text is not reread) is kept as the signatures found it.
    """
    firsts, seconds = pairs["first"].to_pylist(), pairs["second"].to_pylist()
    wanted = sorted(set(firsts) | set(seconds))
    texts = texts_of(wanted)
    known = [k for k in wanted if k in texts]
    if settings is None:
        normalised = dict(zip(known, simplify(pa.array([texts[k] for k in known], pa.string())).to_pylist()))
        keep = [a not in normalised or b not in normalised or normalised[a] == normalised[b]
                for a, b in zip(firsts, seconds)]
        return pairs.filter(pa.array(keep, pa.bool_()))
    values, owners = shingles(pa.array([texts[k] for k in known], pa.string()), settings)
    bounds = np.searchsorted(owners, np.arange(len(known) + 1))
    sets = {key: values[bounds[i]:bounds[i + 1]] for i, key in enumerate(known)}
    keep = [a not in sets or b not in sets or jaccard(sets[a], sets[b]) >= threshold for a, b in zip(firsts, seconds)]
    return pairs.filter(pa.array(keep, pa.bool_()))


def removed_keys(pair_files: Iterable[Path]) -> tuple[set[str], dict[int, int]]:
    """The keys to remove, and how many clusters have each size."""
    clusters = DuplicateClusters()
    for file in pair_files:
        table = pq.read_table(file)
        clusters.join_all(zip(table["first"].to_pylist(), table["second"].to_pylist()))
    return clusters.removed(), clusters.sizes()


def _copy_lines(source: Path, partial: Path, removed: set[int], packed: bool) -> tuple[int, int]:
    rows = kept = 0
    with (gzip.open if packed else open)(source, "rb") as reader, open(partial, "wb") as raw:
        # A gzip header without name and time: the same kept rows give the same bytes.
        target = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if packed else raw
        try:
            for line in reader:
                if not line.strip():
                    continue
                if rows not in removed:
                    target.write(line if line.endswith(b"\n") else line + b"\n")
                    kept += 1
                rows += 1
        finally:
            if packed:
                target.close()
    return rows, kept


def copy_without_rows(source: Path, target: Path, removed: set[int]) -> tuple[int, int]:
    """``source`` without the rows numbered in ``removed``, at ``target``; returns (rows, kept).

    Rows are numbered as the readers number them: non-blank lines of JSON Lines, rows of
    Parquet. A rerun writes the same file again.
    """
    name = source.name
    if not name.endswith((".parquet", ".jsonl", ".jsonl.gz")):
        raise ValueError(f"{source}: dedup removes rows from JSON Lines and Parquet files only")
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target) as partial:
        if name.endswith(".parquet"):
            table = pq.read_table(source)
            mask = np.ones(table.num_rows, dtype=bool)
            mask[[r for r in removed if r < table.num_rows]] = False
            pq.write_table(table.filter(pa.array(mask)), partial, compression="zstd")
            return table.num_rows, int(mask.sum())
        return _copy_lines(source, partial, removed, name.endswith(".gz"))

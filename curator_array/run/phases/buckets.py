"""Dedup, phase 2: ``buckets`` elements, each the candidate pairs of its share of band keys.

Element ``b`` reads, from every shard's signature file, only the row groups of bucket
``b`` (band keys with ``band_key % buckets == b``), and pairs each document with the
smallest key sharing one of its band keys. Memory: one signature file at a time plus this
bucket's share of all (14 rows of about 40 bytes per document, divided by the bucket
count). With ``--dedup-verify`` each pair is confirmed against the documents' texts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.layout import CheckpointLayout
from ...core.phase import Counts, Phase, PhaseResult
from ...core.phase_records import PhaseLayout
from ...core.sharding import ShardRange
from ...pipelines.phase_settings import PhaseSettings
from ..lifecycle import refuse_beyond_memory
from .signatures import (
    BUCKETS_KEY,
    CuratedFiles,
    Segmenting,
    Signatures,
    against_signature_files,
    signatures_file,
    texts_of,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..lifecycle import PhaseContext

BYTES_PER_BAND_KEY = 260  # at the peak, per band-key row of the share (measured: docs/dedup.md)


@dataclass(frozen=True)
class BucketCounts(Counts):
    band_keys: int = 0
    candidate_pairs: int = 0
    pairs: int = 0


class Buckets(Phase):
    name = "buckets"
    needs = ("signatures",)
    noun = "bucket"
    counts = BucketCounts
    added_by = "--dedup"

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return ShardRange(settings.dedup.bucket_count(shards.total)) if settings.dedup is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...dedup.lsh import confirmed_pairs
        from ...dedup.pairfile import write_pairs

        dedup, buckets = context.settings.dedup, len(context.elements(self))
        documents = sum(m.counts.documents for m in context.manifests(Signatures()).values())
        rows = documents * (dedup.minhash.bands if dedup.fuzzy else 1) // buckets
        refuse_beyond_memory(self.name, rows, "band keys", BYTES_PER_BAND_KEY, context.memory_limit_mb())
        files: list[tuple[Path, int | None]] = [(signatures_file(context.layout, s), None) for s in context.run.shards]
        files += against_signature_files(dedup)
        target = pairs_file(context.layout, index)
        pairs, held = bucket_pairs(_ticking(files, context.tick), index, buckets)
        candidates = pairs.num_rows
        if dedup.verify and pairs.num_rows:
            pairs = confirmed_pairs(pairs, lambda keys: _read_texts(context, keys), dedup.threshold, dedup.fuzzy)
        write_pairs(target, pairs["first"].to_numpy(), pairs["second"].to_numpy(), context.run.run_id)
        return PhaseResult(BucketCounts(held, candidates, pairs.num_rows))


def pairs_file(layout: CheckpointLayout, bucket: int) -> Path:
    return PhaseLayout(layout, Buckets()).data_path(bucket, ".pairs")


def _ticking(items: list, tick) -> Iterable:
    for done, item in enumerate(items):
        tick(done, len(items))
        yield item


def bucket_rows(path: Path, bucket: int, buckets: int) -> pa.Table:
    """The rows of ``bucket`` in one signature file: its row groups alone when the file was
    bucketed the same way, else every row filtered (an earlier run's, with its own count)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    signatures = pq.ParquetFile(path)
    columns = ["id", "band", "band_key"]
    if (signatures.schema_arrow.metadata or {}).get(BUCKETS_KEY) == str(buckets).encode():
        groups = _row_groups_of(signatures, bucket)
        if groups is not None:
            return signatures.read_row_groups(groups, columns=columns)
        return pq.read_table(path, columns=columns, filters=[("bucket", "=", bucket)])
    table = signatures.read(columns=columns)
    return table.filter(pa.array((table["band_key"].to_numpy() % np.uint64(buckets)) == np.uint64(bucket)))


def _row_groups_of(signatures: pq.ParquetFile, bucket: int) -> list[int] | None:
    """The row groups of one bucket (each holds one: ``write_signatures``), by their
    statistics; None when a row group has none (then a filtered read finds them)."""
    column, metadata = signatures.schema_arrow.get_field_index("bucket"), signatures.metadata
    statistics = [metadata.row_group(group).column(column).statistics for group in range(metadata.num_row_groups)]
    if any(s is None or not s.has_min_max for s in statistics):
        return None
    return [group for group, s in enumerate(statistics) if s.min == bucket]


def bucket_pairs(signature_files: Iterable[tuple[Path, int | None]], bucket: int,
                 buckets: int) -> tuple[pa.Table, int]:
    """The candidate pairs of one bucket, and how many band keys it held; a signature file
    may come with the source its documents take (an earlier run's, for ``--dedup-against``)."""
    import pyarrow as pa

    from ...dedup.keys import with_source
    from ...dedup.lsh import SIGNATURE_SCHEMA, candidate_pairs

    mine = []
    for file, source in signature_files:
        table = bucket_rows(file, bucket, buckets)
        if source is not None:
            table = table.set_column(0, "id", pa.array(with_source(table["id"].to_numpy(), source)))
        mine.append(table)
    table = pa.concat_tables(mine) if mine else SIGNATURE_SCHEMA.empty_table()
    return candidate_pairs(table), table.num_rows


def _read_texts(context: PhaseContext, ids: list[int]) -> dict[int, tuple[str, tuple[str, str]]]:
    """The texts of documents ``ids`` (this run's only), with their segmenters, read file by
    file from the curation outputs."""
    import numpy as np
    import pyarrow as pa

    from ...dedup.keys import THIS_RUN, files, identities, rows, sources
    from ...formats import reader_for

    ids = np.array(ids, dtype=np.uint64)
    ids = ids[sources(ids) == THIS_RUN]
    every = CuratedFiles.of(context)
    reader, texts, split = reader_for(context.output_format), {}, Segmenting(context)
    for file in np.unique(files(ids)).tolist():
        context.tick()
        wanted = rows(ids[files(ids) == file])
        path = context.staged / every.paths[file]
        table = reader.read_file(str(path)).table.take(pa.array(wanted))
        texts.update(zip(identities(file, wanted).tolist(),
                         zip(texts_of(table, context.text_field, path).to_pylist(), split.of(table))))
    return texts

"""Dedup, phase 4: one element per curation shard, its files without the removed copies.

Each curated file is written into the output dir by the run's own output format
(``WriterStage.rewrite``), so the visible output only ever holds deduplicated documents,
and a rerun writes the same bytes. Every kept document carries its cluster's size
(``minhash_cluster_size``, 1 when it has no copy), as FineWeb-2's re-hydration reads it.
With ``--dedup-keep-removed`` the removed documents go to ``OUTPUT_DIR/.removed/dedup/``,
every field as curated, with the identity (``minhash_kept``: ``file#row``) and the ``id``
of the copy kept (``minhash_kept_id``), so a decision can be audited or undone. The files
are rewritten over the element's CPUs, one per worker at a time, in order (``helpers.parallel``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.counts import Counts
from ...core.phase import SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...stages.defaults import REMOVED_DIR
from ...storage.places import fetched, joined
from .components import shard_labels
from .layouts import CLUSTERS, COMPONENTS, REMOVAL, CuratedFiles, cluster_file
from .signatures import DEDUP, documents_dir, whole_documents

if TYPE_CHECKING:
    import pyarrow as pa

    from ...stages.io import Added
    from ..lifecycle import PhaseContext

CLUSTER_SIZE = "minhash_cluster_size"
KEPT, KEPT_ID = "minhash_kept", "minhash_kept_id"
DEDUP_REMOVED_DIR = Path(REMOVED_DIR) / "dedup"


@dataclass(frozen=True)
class RemovalCounts(Counts):
    rows_in: int = 0
    rows_out: int = 0
    removed: int = 0


class Removal(Phase):
    name = REMOVAL
    needs = (CLUSTERS, COMPONENTS)
    noun = SHARD
    counts = RemovalCounts
    settings_key = DEDUP
    output_staged = True
    staging_dir = ".deduplicated"
    spreads = True

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if whole_documents(settings) else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        rows_in = rows_out = 0
        jobs = self._rewrites(context, index)
        for read, written in context.over_cpus(rewrite_file, jobs, len(context.input_files(self, index))):
            rows_in, rows_out = rows_in + read, rows_out + written
        return PhaseResult(RemovalCounts(rows_in, rows_out, rows_in - rows_out))

    def _rewrites(self, context: PhaseContext, index: int) -> Iterator[FileRewrite]:
        """What each of the shard's curated files becomes, made as the workers ask for it."""
        import numpy as np

        from ...dedup.keys import files, rows

        clustered = clustered_documents(context, index)
        ids, kept, sizes = (clustered[name].to_numpy() for name in ("id", "kept", "size"))
        every = CuratedFiles.of(context.layout, context.run.shards)
        keep_removed = context.settings_of(self).keep_removed
        order = np.argsort(files(ids), kind="stable")
        ids, kept, sizes = ids[order], kept[order], sizes[order]
        file_of = files(ids)
        for relative in context.input_files(self, index):
            file = every.index(relative)
            start, stop = np.searchsorted(file_of, [file, file + 1])
            gone = ids[start:stop] != kept[start:stop]
            row = rows(ids[start:stop])
            audit = (joined(context.output_dir, f"{DEDUP_REMOVED_DIR}/{relative}"),
                     kept_fields(context, every, row[gone], kept[start:stop][gone])) if keep_removed else None
            yield FileRewrite(context.output_format, joined(context.input_dir(self), relative),
                              joined(context.written_dir(self), relative), frozenset(row[gone].tolist()),
                              {CLUSTER_SIZE: (dict(zip(row[~gone].tolist(), sizes[start:stop][~gone].tolist())), 1)},
                              audit)


@dataclass(frozen=True)
class FileRewrite:
    """One curated file without its removed copies (and, for an audit, with them alone): the
    work of one worker process, so it carries plain values only."""

    output_format: str
    source: str  # a path or an s3:// URL
    target: str
    removed: frozenset[int]
    added: dict[str, Added]  # fields every kept row gains (name → (value by row, the others' value))
    audit: tuple[str, dict[str, Added]] | None  # where the removed rows go, and the fields they gain


def rewrite_file(job: FileRewrite) -> tuple[int, int]:
    """Do ``job``; returns (rows read, rows written)."""
    from ...formats import reader_for, writer_for

    writer, reader = writer_for(job.output_format, job.target.rpartition("/")[0]), reader_for(job.output_format)
    if job.audit is not None:  # before the output: an output in place means its audit is too
        target, fields = job.audit
        writer.rewrite(job.source, target, reader, job.removed, only=True, added=fields)
    return writer.rewrite(job.source, job.target, reader, job.removed, added=job.added)


def clustered_documents(context: PhaseContext, shard: int) -> pa.Table:
    """Shard ``shard``'s documents in a cluster (identity, the copy kept, the size), from
    whichever phase found the clusters."""
    import pyarrow.parquet as pq

    if any(planned.name == COMPONENTS for planned in context.plan):
        return shard_labels(context, shard)
    return pq.ParquetFile(cluster_file(context.layout, shard)).read()


def kept_fields(context: PhaseContext, every: CuratedFiles, removed_rows, kept_ids) -> dict[str, Added]:
    """For each removed row, the identity (``file#row``) and the ``id`` field of the copy
    kept, read from the kept copies' curated files."""
    import numpy as np
    import pyarrow as pa

    from ...dedup.keys import THIS_RUN, describe, files, identities, rows, sources
    from ...formats import reader_for

    reader, document_ids = reader_for(context.output_format), {}
    ours = kept_ids[sources(kept_ids) == THIS_RUN]
    for file in np.unique(files(ours)).tolist():
        wanted = np.unique(rows(ours[files(ours) == file]))
        with fetched(joined(documents_dir(context), every.paths[file])) as local:
            table = reader.read_file(str(local)).table
        values = table["id"].take(pa.array(wanted)).to_pylist() if "id" in table.column_names else [None] * len(wanted)
        document_ids.update(zip(identities(file, wanted).tolist(), values))
    labels, kept_document_ids = {}, {}
    for row, kept, source in zip(removed_rows.tolist(), kept_ids.tolist(), sources(kept_ids).tolist()):
        labels[row] = describe(kept, every.paths) if source == THIS_RUN else "an earlier run (--dedup-against)"
        kept_document_ids[row] = document_ids.get(kept)
    return {KEPT: (labels, None), KEPT_ID: (kept_document_ids, None)}

"""Dedup, phase 3: one element, the pairs' connected components and the copies to remove.

It joins every bucket's pairs into clusters (``dedup.clusters``), keeps each cluster's
smallest document key, and writes, per curation shard, the rows to remove from its files,
so each removal element reads only its own shard's list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.layout import CheckpointLayout
from ...core.phase import Counts, Phase, PhaseResult, histogram
from ...core.phase_records import PhaseLayout
from ...core.sharding import ShardRange
from ...dedup.keys import is_against, split_key
from ...pipelines.phase_settings import PhaseSettings
from ..lifecycle import refuse_beyond_memory
from .buckets import Buckets, pairs_file
from .curation import curated_files

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext

BYTES_PER_PAIR = 600  # at the peak: the union-find table and the pair's strings (measured: docs/dedup.md)


@dataclass(frozen=True)
class ClusterCounts(Counts):
    pairs: int = 0
    removed: int = 0
    clusters: int = 0
    cluster_sizes: dict[int, int] = histogram("Duplicate clusters by size", "documents in the cluster", "clusters")


class Clusters(Phase):
    name = "clusters"
    needs = ("buckets",)
    counts = ClusterCounts
    added_by = "--dedup"

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return ShardRange(1) if settings.dedup is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import pyarrow as pa

        from ...formats.parquet import write_parquet

        pairs = sum(m.counts.pairs for m in context.manifests(Buckets()).values())
        refuse_beyond_memory(self.name, pairs, "duplicate pairs", BYTES_PER_PAIR, context.memory_limit_mb())
        removed, sizes = removed_keys(pairs_file(context.layout, b) for b in context.elements(Buckets()))
        ours = sorted(k for k in removed if not is_against(k))
        owner = {file: shard for shard in context.run.shards for file in curated_files(context, shard)}
        rows: dict[int, tuple[list[str], list[int]]] = {shard: ([], []) for shard in context.run.shards}
        for key in ours:
            file, row = split_key(key)
            files, numbers = rows[owner[file]]
            files.append(file)
            numbers.append(row)
        for shard, (files, numbers) in rows.items():
            context.tick()
            write_parquet(pa.table({"file": pa.array(files, pa.string()), "row": pa.array(numbers, pa.int64())}),
                          removed_file(context.layout, shard))
        return PhaseResult(ClusterCounts(pairs, len(ours), sum(sizes.values()), sizes))


def removed_file(layout: CheckpointLayout, shard: int) -> Path:
    """The rows curation shard ``shard``'s files lose, as (file, row)."""
    return PhaseLayout(layout, Clusters()).data_dir / "removed" / f"shard_{shard}.parquet"


def removed_keys(pair_files) -> tuple[set[str], dict[int, int]]:
    """The keys to remove, and how many clusters have each size."""
    import pyarrow.parquet as pq

    from ...dedup.clusters import DuplicateClusters

    clusters = DuplicateClusters()
    for file in pair_files:
        table = pq.read_table(file)
        clusters.join_all(zip(table["first"].to_pylist(), table["second"].to_pylist()))
    return clusters.removed(), clusters.sizes()

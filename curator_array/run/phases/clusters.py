"""Dedup, phase 3: one element, the pairs' connected components and the copies to remove.

It streams every bucket's pairs, finds the clusters they join (``dedup.clusters``: arrays,
about 27 bytes per document in a cluster at the peak), keeps each cluster's smallest
identity, and writes, per curation shard, every document of that shard that is in a
cluster: its identity, the identity of the copy kept, and its cluster's size. Each removal
element then reads only its own shard's file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.counts import Counts, histogram
from ...core.phase import Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ..lifecycle import refuse_beyond_memory
from .layouts import BUCKETS, CLUSTERS, CuratedFiles, cluster_file, pairs_file
from .signatures import DEDUP, whole_documents

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext

# At the peak, 27 bytes per document in a cluster (bench/bench_clusters.py, docs/dedup.md),
# and a pair brings at most two documents.
BYTES_PER_PAIR = 56
# Shared among the elements of the components phase, 160 bytes per pair at a step's peak
# (bench/bench_components.py: 1,378 MiB for 9.2 million pairs on one element, 394 MiB each on four).
BYTES_PER_PAIR_IN_ROUNDS = 160


def cluster_sizes_field():
    """The counts field of how many duplicate clusters have each size."""
    return histogram("Duplicate clusters by size", "documents in the cluster", "clusters")


@dataclass(frozen=True)
class ClusterCounts(Counts):
    pairs: int = 0
    removed: int = 0
    clusters: int = 0
    cluster_sizes: dict[int, int] = cluster_sizes_field()


class Clusters(Phase):
    name = CLUSTERS
    needs = (BUCKETS,)
    counts = ClusterCounts
    settings_key = DEDUP

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        dedup = whole_documents(settings)
        one = dedup is not None and dedup.components_elements == 1
        return ShardRange(1) if one else None  # else the components phase does this work

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        pairs = sum(m.counts.pairs for m in context.manifests(BUCKETS).values())
        limit = context.memory_limit_mb()
        elements = max(2, math.ceil(pairs * BYTES_PER_PAIR_IN_ROUNDS / 2**20 / (0.8 * limit))) if limit else 2
        refuse_beyond_memory(self.name, pairs, "duplicate pairs", BYTES_PER_PAIR, limit,
                             f"share them among elements (--dedup-components-elements {elements})")
        paths = [pairs_file(context.layout, b) for b in context.elements(BUCKETS)]
        run_id = context.run.run_id
        counts = cluster_files(streamed_pairs(paths, pairs, run_id, context.tick), pairs,
                               CuratedFiles.of(context.layout, context.run.shards).shards,
                               context.run.shards, lambda shard: cluster_file(context.layout, shard), context.tick)
        return PhaseResult(counts)


def cluster_files(pairs_of, pairs: int, shard_of_file, shards: ShardRange, path_of, tick=lambda: None) -> ClusterCounts:
    """The clusters of the pairs ``pairs_of`` reads (``dedup.clusters.Pairs``), written per
    shard (``path_of(shard)``): every one of the shard's documents in a cluster, with the
    copy kept and the size. Beside the components it holds 13 bytes a document (each one's
    shard, the order by shard, the sizes), every other array chunk by chunk."""
    import pyarrow as pa

    from ...dedup.clusters import components
    from ...formats.parquet import write_parquet

    clusters = components(pairs_of)
    nodes = clusters.nodes
    ours, order, bounds = by_shard(nodes, shard_of_file, shards)
    sizes = clusters.cluster_sizes()
    for shard, start, stop in zip(shards, bounds[1:-1], bounds[2:]):
        tick()
        chosen = order[start:stop]
        roots = clusters.roots[chosen]
        write_parquet(pa.table({"id": nodes[chosen], "kept": nodes[roots], "size": sizes[roots]}), path_of(shard))
    histogram_ = clusters.size_histogram(sizes)
    return ClusterCounts(pairs, int(ours.sum()) - clusters.kept_among(ours), sum(histogram_.values()), histogram_)


def by_shard(nodes, shard_of_file, shards: ShardRange):
    """Which ``nodes`` are this run's documents, their indices grouped by their file's
    curation shard (stable: sorted nodes stay sorted), and where each group starts: group 0
    holds earlier runs' documents, group 1 + k the shard ``shards.minimum + k``. Worked out
    chunk by chunk, beside 4 bytes a node."""
    import numpy as np

    from ...dedup.clusters import CHUNK, grouped
    from ...dedup.keys import FILE_MASK, ROW_BITS, SOURCE_SHIFT, THIS_RUN

    table = np.asarray(shard_of_file, dtype=np.int32)
    ours = nodes >= np.uint64(THIS_RUN << SOURCE_SHIFT)  # this run's documents sort last
    group = np.zeros(len(nodes), dtype=np.int32)
    for start in range(0, len(nodes), CHUNK):
        mine = ours[start:start + CHUNK]
        files = (nodes[start:start + CHUNK][mine] >> np.uint64(ROW_BITS)) & np.uint64(FILE_MASK)
        group[start:start + CHUNK][mine] = table[files] - shards.minimum + 1
    order, bounds = grouped(group, shards.total + 1)
    return ours, order, bounds


def streamed_pairs(paths: list[Path], expected: int, run_id: str | None, tick=lambda: None):
    """Every bucket file's pairs, a chunk at a time, each time the result is called. The
    files are checked first (``dedup.pairfile``), and their pairs against the manifests'
    count, so a bad file is refused before any work."""
    from ...core.errors import CorruptCheckpointError
    from ...dedup.clusters import CHUNK
    from ...dedup.pairfile import pair_chunks, pair_count

    found = sum(pair_count(path, run_id) for path in paths)
    if found != expected:
        raise CorruptCheckpointError(f"the bucket files hold {found:,} pairs, their manifests {expected:,}: "
                                     "rerun the buckets phase")

    def read():
        for path in paths:
            tick()
            yield from pair_chunks(path, run_id, CHUNK)

    return read

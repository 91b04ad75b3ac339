"""URL dedup, phase 3: one element per curation shard, its files without the other copies of a URL.

Each file is written again without the documents a URL buckets element did not keep (their
identities, read from every bucket's sorted file, memory-mapped: a file reads its own slice),
by the run's output format, byte for byte for JSON Lines; with ``--dedup-keep-removed`` the
removed ones go to ``OUTPUT_DIR/.removed/urls/`` as they were. Files are rewritten over the
element's CPUs, one per worker at a time, in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.counts import Counts
from ...core.phase import SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...stages.defaults import REMOVED_DIR
from ...storage.places import joined
from .layouts import URL_BUCKETS, URL_KEYS, URL_REMOVAL, CuratedFiles, url_losers_file
from .removal import FileRewrite, rewrite_file
from .signatures import DEDUP
from .url_keys import url_dedup

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext

URLS_REMOVED_DIR = f"{REMOVED_DIR}/urls"


@dataclass(frozen=True)
class UrlRemovalCounts(Counts):
    rows_in: int = 0
    rows_out: int = 0
    removed: int = 0


class UrlRemoval(Phase):
    name = URL_REMOVAL
    needs = (URL_KEYS, URL_BUCKETS)
    noun = SHARD
    counts = UrlRemovalCounts
    settings_key = DEDUP
    output_staged = True
    staging_dir = ".urls-deduplicated"
    spreads = True

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if url_dedup(settings) else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        counts = UrlRemovalCounts()
        for read, written in context.over_cpus(rewrite_file, self._jobs(context, index),
                                               len(context.input_files(self, index))):
            counts += UrlRemovalCounts(read, written, read - written)
        return PhaseResult(counts)

    def _jobs(self, context: PhaseContext, index: int) -> Iterator[FileRewrite]:
        import numpy as np

        from ...dedup.keys import ROW_MASK, identities

        every = CuratedFiles.of(context.layout, context.run.shards)
        losers = [np.load(url_losers_file(context.layout, b), mmap_mode="r") for b in context.elements(URL_BUCKETS)]
        keep_removed = context.settings_of(self).keep_removed
        for relative in context.input_files(self, index):
            first, end = identities(every.index(relative), np.array([0, ROW_MASK]))
            rows = set()
            for removed in losers:
                start, stop = int(np.searchsorted(removed, first)), int(np.searchsorted(removed, end, side="right"))
                rows.update((np.asarray(removed[start:stop]) & np.uint64(ROW_MASK)).astype(np.int64).tolist())
            audit = (joined(context.output_dir, f"{URLS_REMOVED_DIR}/{relative}"), {}) if keep_removed else None
            yield FileRewrite(context.output_format, joined(context.input_dir(self), relative),
                              joined(context.written_dir(self), relative), frozenset(rows), {}, audit)

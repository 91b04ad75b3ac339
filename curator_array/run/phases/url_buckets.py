"""URL dedup, phase 2: ``buckets`` elements, each its share of the run's URL keys.

Element ``b`` loads bucket ``b``'s rows from every shard's URL keys and keeps, per normalised
URL, the document with the highest priority (the smallest identity among equals); it writes
the identities of the others, sorted. Memory: 24 bytes a document of its share, and the sort.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.atomic import replacing
from ...core.counts import Counts
from ...core.phase import Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from .layouts import BUCKET, URL_BUCKETS, URL_KEYS, url_keys_file, url_losers_file
from .signatures import DEDUP
from .url_keys import url_dedup

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext


@dataclass(frozen=True)
class UrlBucketCounts(Counts):
    urls: int = 0  # documents with a URL in this share
    removed: int = 0


class UrlBuckets(Phase):
    name = URL_BUCKETS
    needs = (URL_KEYS,)
    noun = BUCKET
    counts = UrlBucketCounts
    settings_key = DEDUP

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        dedup = url_dedup(settings)
        return ShardRange(dedup.bucket_count(shards.total)) if dedup is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import numpy as np

        from ...dedup.urls import losers

        parts = []
        for shard in context.run.shards:
            with np.load(url_keys_file(context.layout, shard)) as arrays:
                parts.append(tuple(arrays[f"{name}{index}"] for name in ("keys", "ids", "priorities")))
        keys, ids, ranks = (np.concatenate([part[i] for part in parts]) for i in range(3))
        removed = losers(keys, ids, ranks)
        path = url_losers_file(context.layout, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path) as partial, open(partial, "wb") as handle:
            np.save(handle, removed)
        return PhaseResult(UrlBucketCounts(len(keys), len(removed)))

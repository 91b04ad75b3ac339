"""Paragraph dedup, phase 2: ``buckets`` elements, each its share of the run's n-grams.

Element ``b`` reads bucket ``b``'s n-grams (``key % buckets == b``) from every shard's n-gram
file and finds, for each paragraph, how many of its n-grams occur at an earlier position of
the run (``dedup.paragraphs.seen_earlier``). Memory: the share's rows, 16 bytes each, and
the sort over them, about ``BYTES_PER_NGRAM`` per n-gram at the peak: ``--dedup-buckets``
bounds it (docs/dedup.md gives the formula).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.atomic import replacing
from ...core.counts import Counts
from ...core.phase import Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ..lifecycle import refuse_beyond_memory
from .layouts import BUCKET, PARAGRAPH_BUCKETS, PARAGRAPH_NGRAMS, paragraph_ngrams_file, seen_files
from .paragraph_ngrams import paragraph_dedup
from .signatures import DEDUP

if TYPE_CHECKING:
    import numpy as np

    from ..lifecycle import PhaseContext

BYTES_PER_NGRAM = 64  # at the peak, per n-gram of the share: its row, the packed keys sorted and gathered copies


@dataclass(frozen=True)
class ParagraphBucketCounts(Counts):
    RATE = "ngrams"
    ngrams: int = 0
    seen_earlier: int = 0  # n-gram occurrences after their first paragraph
    paragraphs_with_seen: int = 0


class ParagraphBuckets(Phase):
    name = PARAGRAPH_BUCKETS
    needs = (PARAGRAPH_NGRAMS,)
    noun = BUCKET
    counts = ParagraphBucketCounts
    settings_key = DEDUP
    huge_pages = False  # fresh arrays of GBs: see run.huge_pages

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        dedup = paragraph_dedup(settings)
        return ShardRange(dedup.bucket_count(shards.total)) if dedup is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import numpy as np

        from ...dedup.paragraphs import in_position_order, seen_earlier

        buckets = context.elements(self.name).total
        ngrams = sum(m.counts.ngrams for m in context.manifests(PARAGRAPH_NGRAMS).values())
        refuse_beyond_memory("paragraph buckets", ngrams // buckets, "paragraph n-grams", BYTES_PER_NGRAM,
                             context.memory_limit_mb(), instead="raise --dedup-buckets (it is pinned at submit)")
        positions, keys = in_position_order(self._shares(context, index, buckets))
        found, counts = seen_earlier(positions, keys)
        for path, values in zip(seen_files(context.layout, index), (found, counts)):
            path.parent.mkdir(parents=True, exist_ok=True)
            with replacing(path) as partial, open(partial, "wb") as handle:
                np.save(handle, values)
        return PhaseResult(ParagraphBucketCounts(len(keys), int(counts.sum()), len(found)))

    @staticmethod
    def _shares(context: PhaseContext, index: int, buckets: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Bucket ``index``'s rows of each shard: (positions, keys)."""
        from ...dedup.bandfile import BandFile

        shares = []
        for done, shard in enumerate(context.run.shards):
            context.tick(done, context.run.shards.total)
            shares.append(BandFile(paragraph_ngrams_file(context.layout, shard), minhash=False).share(index, buckets, 0))
        return shares

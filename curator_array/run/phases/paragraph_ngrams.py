"""Paragraph dedup, phase 1: one element per curation shard, its paragraphs' n-grams.

Each of the shard's curated files is read a batch at a time; every word n-gram of every
paragraph goes into one band file (``dedup.bandfile``, one band) with its paragraph's run
position (``dedup.paragraphs.positions``), grouped by bucket (``key % buckets``), so a
paragraph buckets element reads its share and nothing else. How many n-grams each
paragraph has is kept beside it, per file, for the removal phase, which then needs no
second pass of the word splitter. Batches are split into words over the element's CPUs.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ...core.atomic import write_bytes_atomic
from ...core.counts import Counts
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from .layouts import (
    CURATION,
    PARAGRAPH_BUCKETS,
    PARAGRAPH_NGRAMS,
    paragraph_ngrams_file,
    paragraph_totals_file,
    shard_tables,
)
from .signatures import DEDUP, FLUSH_ROWS, texts_of

if TYPE_CHECKING:
    import numpy as np

    from ...dedup.paragraphs import ExactRepeats
    from ...dedup.settings import DedupSettings
    from ..lifecycle import PhaseContext


def paragraph_dedup(settings: PhaseSettings) -> DedupSettings | None:
    """The run's dedup settings when it has a step below the document (paragraphs or lines), else None."""
    dedup = settings.get(DEDUP)
    return dedup if dedup is not None and dedup.below_documents else None


@dataclass(frozen=True)
class ParagraphNGramCounts(Counts):
    RATE = "paragraphs"
    documents: int = 0
    paragraphs: int = 0
    ngrams: int = 0
    exact_repeats: int = 0  # paragraphs equal to one this element cut before: not cut again, all seen


@dataclass(frozen=True)
class Batch:
    """A batch of one curated file's texts, for a worker: plain values only."""

    file: int
    first_ordinal: int  # the file's ordinal of the batch's first paragraph
    texts: list
    scope: str  # batches of one scope come in position order: they may share their paragraphs' repeats


class ParagraphNGrams(Phase):
    name = PARAGRAPH_NGRAMS
    needs = (CURATION, OUTPUT)  # positions index every curated file
    noun = SHARD
    counts = ParagraphNGramCounts
    settings_key = DEDUP
    spreads = True

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if paragraph_dedup(settings) else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import numpy as np

        from ...dedup.bandfile import BandFileWriter, BandRows
        from ...helpers.parallel import ordered_map

        settings = context.settings_of(self)
        buckets = context.elements(PARAGRAPH_BUCKETS).total
        totals: dict[int, list[np.ndarray]] = {}
        repeats: dict[int, list[np.ndarray]] = {}
        figures = np.zeros(4, dtype=np.int64)
        with BandFileWriter(paragraph_ngrams_file(context.layout, index), buckets, 1, FLUSH_ROWS) as writer:
            for file, positions, keys, counts, repeated, documents in ordered_map(
                    partial(batch_rows, settings=settings), self._batches(context, index), context.cpus):
                writer.add(BandRows(positions, np.zeros(len(keys), np.uint8), keys))
                totals.setdefault(file, []).append(counts)
                repeated = np.zeros(len(counts), bool) if repeated is None else repeated
                repeats.setdefault(file, []).append(repeated)
                figures += (documents, len(counts), len(keys), int(repeated.sum()))
        buffer = io.BytesIO()
        np.savez(buffer, **{f"f{file}": np.concatenate(parts) for file, parts in totals.items()},
                 **{f"r{file}": np.concatenate(parts) for file, parts in repeats.items()})
        write_bytes_atomic(paragraph_totals_file(context.layout, index), buffer.getvalue())
        return PhaseResult(ParagraphNGramCounts(*figures.tolist()))

    def _batches(self, context: PhaseContext, index: int) -> Iterator[Batch]:
        from ...dedup.paragraphs import paragraph_count

        ordinal, current, token, generation = 0, None, uuid.uuid4().hex, 0
        for file, name, _, table in shard_tables(context, self, index, (context.text_field,)):
            generation += current is not None and file < current  # an earlier file: its paragraphs come first
            ordinal = 0 if file != current else ordinal
            current, texts = file, texts_of(table, context.text_field, name).to_pylist()
            yield Batch(file, ordinal, texts, f"{token}-{generation}")
            ordinal += sum(map(paragraph_count, texts))


_REPEATS: dict[str, ExactRepeats] = {}  # this process's, for the batches of one scope


def batch_rows(batch: Batch, settings: DedupSettings
               ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, int]:
    """A batch's (file, key positions, keys, keys per paragraph, exact repeats, documents)."""
    from ...dedup.paragraphs import ExactRepeats, batch_keys, positions

    if batch.scope not in _REPEATS:
        _REPEATS.clear()
        _REPEATS[batch.scope] = ExactRepeats()
    grams = batch_keys(batch.texts, settings, _REPEATS[batch.scope])
    return (batch.file, positions(batch.file, grams.paragraph_of + batch.first_ordinal), grams.keys, grams.totals,
            grams.repeats, len(batch.texts))

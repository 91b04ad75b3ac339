"""Paragraph dedup, phase 3: one element per curation shard, its files without the repeated paragraphs.

For each of the shard's files, every paragraph's n-grams seen earlier are added up from the
buckets' files (memory-mapped: a file reads only its own positions' slice of each), and
each document is decided as BFF's ``old-both`` does (``dedup.paragraphs.decide``): its
repeated paragraphs are cut, and a document emptied (too many of its n-grams seen before, or
nothing left) is dropped and counted. The file is written again, by the run's output format,
under its own name, for the next writer of the run or as the output. Files are rewritten over
the element's CPUs, one per worker at a time, in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.counts import Counts, histogram
from ...core.errors import CorruptCheckpointError
from ...core.phase import SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...storage.places import fetched, joined
from .layouts import (
    PARAGRAPH_BUCKETS,
    PARAGRAPH_NGRAMS,
    PARAGRAPH_REMOVAL,
    CuratedFiles,
    paragraph_totals_file,
    seen_files,
)
from .paragraph_ngrams import paragraph_dedup
from .signatures import DEDUP

if TYPE_CHECKING:
    import numpy as np

    from ..lifecycle import PhaseContext


@dataclass(frozen=True)
class ParagraphRemovalCounts(Counts):
    rows_in: int = 0
    rows_out: int = 0
    documents_emptied: int = 0
    paragraphs: int = 0
    paragraphs_removed: int = 0
    paragraphs_too_short: int = 0  # no n-gram: always kept
    bytes_removed: int = 0
    removed_per_document: dict[int, int] = histogram(
        "Paragraphs removed per document", "paragraphs removed", "documents")


class ParagraphRemoval(Phase):
    name = PARAGRAPH_REMOVAL
    needs = (PARAGRAPH_NGRAMS, PARAGRAPH_BUCKETS)
    noun = SHARD
    counts = ParagraphRemovalCounts
    settings_key = DEDUP
    output_staged = True
    staging_dir = ".paragraphs-deduplicated"
    spreads = True

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if paragraph_dedup(settings) else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from functools import reduce

        from ...helpers.parallel import ordered_map

        names = context.input_files(self, index)
        results = []
        for done, counts in enumerate(ordered_map(rewrite_paragraphs, self._rewrites(context, index), context.cpus)):
            context.tick(done + 1, len(names))
            results.append(counts)
        return PhaseResult(reduce(lambda a, b: a + b, results, ParagraphRemovalCounts()))

    def _rewrites(self, context: PhaseContext, index: int) -> Iterator[ParagraphRewrite]:
        import numpy as np

        from ...dedup.paragraphs import file_range

        every = CuratedFiles.of(context.layout, context.run.shards)
        buckets = [seen_files(context.layout, b) for b in context.elements(PARAGRAPH_BUCKETS)]
        with np.load(paragraph_totals_file(context.layout, index)) as totals_of:
            for relative in context.input_files(self, index):
                file = every.index(relative)
                totals = totals_of[f"f{file}"] if f"f{file}" in totals_of.files else np.zeros(0, np.uint32)
                seen = np.zeros(len(totals), dtype=np.int64)
                first, end = file_range(file)
                for positions_path, counts_path in buckets:
                    positions = np.load(positions_path, mmap_mode="r")
                    start, stop = np.searchsorted(positions, [first, end])
                    if stop > start:
                        ordinals = (np.asarray(positions[start:stop]) - first).astype(np.int64)
                        seen[ordinals] += np.load(counts_path, mmap_mode="r")[start:stop]
                yield ParagraphRewrite(context.output_format, context.text_field,
                                       joined(context.input_dir(self), relative),
                                       joined(context.written_dir(self), relative), totals, seen,
                                       context.settings_of(self).paragraph.threshold)


@dataclass(frozen=True)
class ParagraphRewrite:
    """One curated file without its repeated paragraphs: a worker's job, plain values only."""

    output_format: str
    text_field: str
    source: str
    target: str
    totals: np.ndarray  # n-grams of each of the file's paragraphs
    seen: np.ndarray  # of them, seen at an earlier position
    threshold: float


def rewrite_paragraphs(job: ParagraphRewrite) -> ParagraphRemovalCounts:
    """Do ``job``; returns what it removed."""
    import pyarrow as pa

    from ...dedup.paragraphs import decide
    from ...formats import reader_for, writer_for

    reader = reader_for(job.output_format)
    with fetched(job.source) as local:
        table = reader.read_file(str(local)).table
    texts = table[job.text_field].to_pylist() if job.text_field in table.column_names else [None] * table.num_rows
    kept, new_texts, per_document = [], [], {}
    emptied = removed = too_short = bytes_removed = ordinal = 0
    for row, text in enumerate(texts):
        count = 1 + (text or "").count("\n")
        decision = decide(text, job.totals[ordinal:ordinal + count], job.seen[ordinal:ordinal + count], job.threshold)
        ordinal += count
        removed += decision.removed
        too_short += decision.too_short
        per_document[decision.removed] = per_document.get(decision.removed, 0) + 1
        bytes_removed += len((text or "").encode()) - len(decision.text.encode())
        if decision.emptied:
            emptied += 1
            continue
        kept.append(row)
        new_texts.append(decision.text if decision.removed else text)
    if ordinal != len(job.totals):
        raise CorruptCheckpointError(f"{job.source}: {ordinal} paragraphs, but its n-gram phase counted {len(job.totals)}: "
                           "the file changed since; rerun the run's paragraph phases")
    table = table.take(pa.array(kept, pa.int64()))
    if job.text_field in table.column_names:
        position = table.column_names.index(job.text_field)
        table = table.set_column(position, job.text_field, pa.array(new_texts, table.schema.field(job.text_field).type))
    writer_for(job.output_format, job.target.rpartition("/")[0]).write_at(job.target, table)
    return ParagraphRemovalCounts(len(texts), len(kept), emptied, ordinal, removed, too_short, bytes_removed,
                                  dict(sorted(per_document.items())))

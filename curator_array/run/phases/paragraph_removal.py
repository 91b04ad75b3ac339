"""Paragraph dedup, phase 3: one element per curation shard, its files without the repeated paragraphs.

For each of the shard's files, every paragraph's n-grams seen earlier are added up from the
buckets' files (memory-mapped: a file reads only its own positions' slice of each), and
each document is decided as BFF's ``old-both`` does (``dedup.paragraphs.decide``): its
repeated paragraphs are cut, and a document emptied (too many of its n-grams seen before, or
nothing left) is dropped and counted. The file is written again, by the run's output format,
under its own name, for the next writer of the run or as the output. With
``--dedup-keep-removed``, every document that lost anything is written as it was under
``OUTPUT_DIR/.removed/paragraphs/``, with the spans cut (``bff_duplicate_spans``: UTF-8 byte
offsets, as BFF's ``--annotate`` gives them) and whether it was emptied. Files are rewritten
over the element's CPUs, one per worker at a time, in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.counts import Counts, histogram
from ...core.errors import CorruptCheckpointError
from ...core.phase import SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...stages.defaults import REMOVED_DIR
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

    from ...dedup.paragraphs import SpanRule
    from ..lifecycle import PhaseContext

PARAGRAPHS_REMOVED_DIR = f"{REMOVED_DIR}/paragraphs"
SPANS, EMPTIED = "bff_duplicate_spans", "bff_document_emptied"


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
        jobs = self._rewrites(context, index)
        return PhaseResult(sum(context.over_cpus(rewrite_paragraphs, jobs, len(context.input_files(self, index))),
                               ParagraphRemovalCounts()))

    def _rewrites(self, context: PhaseContext, index: int) -> Iterator[ParagraphRewrite]:
        import numpy as np

        from ...dedup.paragraphs import SpanRule, file_range

        every = CuratedFiles.of(context.layout, context.run.shards)
        buckets = [tuple(np.load(path, mmap_mode="r") for path in seen_files(context.layout, b))
                   for b in context.elements(PARAGRAPH_BUCKETS)]
        settings = context.settings_of(self)
        with np.load(paragraph_totals_file(context.layout, index)) as totals_of:
            for relative in context.input_files(self, index):
                file = every.index(relative)
                totals = totals_of[f"f{file}"] if f"f{file}" in totals_of.files else np.zeros(0, np.uint32)
                seen = np.zeros(len(totals), dtype=np.int64)
                first, end = file_range(file)
                for positions, counts in buckets:
                    start, stop = np.searchsorted(positions, [first, end])
                    if stop > start:
                        seen[(np.asarray(positions[start:stop]) - first).astype(np.int64)] += counts[start:stop]
                if f"r{file}" in totals_of.files:  # exact repeats: every n-gram seen, none written
                    repeated = totals_of[f"r{file}"]
                    seen[repeated] = totals[repeated]
                audit = joined(context.output_dir, f"{PARAGRAPHS_REMOVED_DIR}/{relative}") if settings.keep_removed \
                    else None
                yield ParagraphRewrite(context.output_format, context.text_field,
                                       joined(context.input_dir(self), relative),
                                       joined(context.written_dir(self), relative), totals, seen,
                                       SpanRule.of(settings), audit)


@dataclass(frozen=True)
class ParagraphRewrite:
    """One curated file without its repeated paragraphs: a worker's job, plain values only."""

    output_format: str
    text_field: str
    source: str
    target: str
    totals: np.ndarray  # n-grams of each of the file's paragraphs
    seen: np.ndarray  # of them, seen at an earlier position
    rule: SpanRule
    audit: str | None = None  # where the documents that lost anything go, as they were


def rewrite_paragraphs(job: ParagraphRewrite) -> ParagraphRemovalCounts:
    """Do ``job``, holding one block of the file's texts and the changed texts; returns what
    it removed."""
    import numpy as np

    from ...dedup.paragraphs import decide, paragraph_count
    from ...formats import reader_for, writer_for
    from .signatures import texts_of

    reader = reader_for(job.output_format)
    changed, dropped, spans, emptied, removed_per_row = {}, [], {}, {}, []
    rows = too_short = bytes_removed = ordinal = 0
    with fetched(job.source) as local:
        for table in reader.read_columns(str(local), (job.text_field,)):
            texts = texts_of(table, job.text_field, job.source).to_pylist() \
                if job.text_field in table.column_names else [None] * table.num_rows
            count = sum(map(paragraph_count, texts))
            if ordinal + count > len(job.totals):
                raise _changed_since(job, "more")
            batch = decide(texts, job.totals[ordinal:ordinal + count], job.seen[ordinal:ordinal + count], job.rule,
                           with_spans=job.audit is not None)
            ordinal += count
            too_short += batch.too_short
            bytes_removed += batch.bytes_removed
            removed_per_row.append(batch.removed)
            changed.update((rows + row, text) for row, text in batch.changed.items())
            spans.update((rows + row, cuts) for row, cuts in batch.spans.items())
            emptied.update((rows + row, bool(batch.emptied[row]))
                           for row in np.flatnonzero((batch.removed > 0) | batch.emptied).tolist())
            dropped.extend((rows + np.flatnonzero(batch.emptied)).tolist())
            rows += len(texts)
        if ordinal != len(job.totals):
            raise _changed_since(job, "fewer")
        writer = writer_for(job.output_format, job.target.rpartition("/")[0])
        if job.audit is not None:  # before the output: an output in place means its audit is too
            writer.rewrite(local, job.audit, reader, set(emptied), only=True,
                           added={SPANS: ({row: [list(span) for span in spans.get(row, ())] for row in emptied}, None),
                                  EMPTIED: (emptied, False)})
        writer.rewrite(local, job.target, reader, set(dropped), replaced={job.text_field: changed})
    removed = np.concatenate(removed_per_row) if removed_per_row else np.zeros(0, np.int64)
    return ParagraphRemovalCounts(rows, rows - len(dropped), len(dropped), ordinal, int(removed.sum()), too_short,
                                  bytes_removed, {size: n for size, n in enumerate(np.bincount(removed).tolist()) if n})


def _changed_since(job: ParagraphRewrite, which: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(f"{job.source}: {which} paragraphs than the {len(job.totals)} its n-gram phase "
                                  "counted: the file changed since; rerun the run's paragraph phases")

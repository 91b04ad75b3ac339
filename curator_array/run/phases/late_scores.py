"""Quality models after the paragraph dedup: one element per curation shard, its files scored.

DCLM-Baseline removes repeated paragraphs before its fastText classifier decides, so the
classifier sees each document as it will be trained on, and the paragraph filter holds the
paragraphs of documents the classifier would later drop. A run with ``--dedup paragraphs`` and
``--quality-model`` therefore scores here, after the dedup phases, instead of in the first
phase: each document gets its models' columns, and those below a ``--quality-threshold`` (or
above a ceiling) are dropped, counted per model. Files are scored over the element's CPUs,
one per worker at a time (each worker loads the models once: a model's memory per CPU).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...classify.settings import QUALITY
from ...core.counts import Counts, breakdown
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...storage.places import fetched, joined

if TYPE_CHECKING:
    from ...classify.settings import QualitySettings
    from ..lifecycle import PhaseContext

LATE_SCORES = "quality_after_dedup"


@dataclass(frozen=True)
class LateScoreCounts(Counts):
    RATE = "rows_in"
    rows_in: int = 0
    rows_out: int = 0
    dropped_by_model: dict[str, int] = breakdown("Documents dropped by each quality model")


class LateScores(Phase):
    name = LATE_SCORES
    needs = (OUTPUT,)
    noun = SHARD
    counts = LateScoreCounts
    matching_elements = True
    settings_key = QUALITY
    output_staged = True
    staging_dir = ".scored"
    spreads = True

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        quality = settings.get(self.settings_key)
        return shards if quality is not None and quality.after_dedup else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        jobs = self._jobs(context, index)
        return PhaseResult(sum(context.over_cpus(score_file, jobs, len(context.input_files(self, index))),
                               LateScoreCounts()))

    def _jobs(self, context: PhaseContext, index: int) -> Iterator[FileScoring]:
        settings = context.request.options.phases.get(self.settings_key)  # the run's: open_run compared the digests
        for relative in context.input_files(self, index):
            yield FileScoring(context.output_format, context.text_field, settings,
                              joined(context.input_dir(self), relative), joined(context.written_dir(self), relative))


@dataclass(frozen=True)
class FileScoring:
    """One file scored and filtered: a worker's job, plain values only."""

    output_format: str
    text_field: str
    settings: QualitySettings
    source: str
    target: str


def score_file(job: FileScoring) -> LateScoreCounts:
    """Do ``job``; returns the rows read and written and the drops by model."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...formats import reader_for, writer_for
    from ...stages.classifiers import QualityScorer

    with fetched(job.source) as local:
        table = reader_for(job.output_format).read_file(str(local)).table
    text = table[job.text_field] if job.text_field in table.column_names else pa.nulls(table.num_rows, pa.string())
    table, rules = QualityScorer.of(job.settings, job.text_field).score(table, text)
    keep = pa.array([True] * table.num_rows)
    dropped = {}
    for name, passes in rules.items():
        passes = pc.fill_null(passes, False)
        dropped[name] = int(pc.sum(pc.and_(keep, pc.invert(passes))).as_py() or 0)
        keep = pc.and_(keep, passes)
    kept = table.filter(keep)
    writer_for(job.output_format, job.target.rpartition("/")[0]).write_at(job.target, kept)
    return LateScoreCounts(table.num_rows, kept.num_rows, dropped)

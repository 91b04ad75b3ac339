"""Selection by model across the whole run: three phases after dedup's (when the run has them).

The first phase scores every document as it is written (``stages.classifiers``, with
``--quality-model``); these phases select from the scores of the documents the run keeps,
when it asks for ``--keep-top-fraction`` or ``--quality-buckets``:

- ``quality_scores``, one element per shard: the shard's score histograms, one per model.
  A score's bin is ``floor(score * 2**24)``, finer than a float32 probability near 1, so
  documents share a bin only when their scores (almost) tie; each bin holds its documents
  and their tokens (``token_count``, with ``--tokenize``). Sparse: a shard's file holds the
  bins its documents fall in, not all 16 M.
- ``quality_cut``, one element: every shard's histograms merged; each model's threshold
  (the bin whose documents at or above it come closest to the top fraction asked; its rank
  error is how far the kept fraction is from it) and bucket edges (the bins where the
  documents' weight below them comes closest to k/N of the whole, weighted by tokens when
  the run tokenizes), pinned in ``cut.json``. The buckets are percentiles of every scored
  document, before any top fraction is removed.
- ``quality_selection``, one element per shard: each output file rewritten without the
  documents below a threshold, with ``NAME_bucket`` per model and ``quality_bucket`` (their
  maximum, or their mean with ``--quality-ensemble mean``), under ``bucket=KK/`` with
  ``--partition-by-bucket``; with ``--keep-removed`` the removed documents go to
  ``OUTPUT_DIR/.removed/quality/``, scores and all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...classify.settings import QUALITY, QualitySettings
from ...core.atomic import dump_json, write_bytes_atomic
from ...core.counts import Counts, breakdown
from ...core.errors import CuratorArrayError
from ...core.options import RunOption
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...stages.defaults import REMOVED_DIR
from ...stages.defaults import TOKEN_COUNT_FIELD as TOKEN_COUNT
from ...storage.places import fetched, joined
from .layouts import CUT, SCORES, SELECTION, TOKENIZE

if TYPE_CHECKING:
    import numpy as np

    from ..lifecycle import PhaseContext

BINS = 1 << 24
QUALITY_REMOVED_DIR = Path(REMOVED_DIR) / "quality"
BEST_BUCKET = "quality_bucket"
CUT_FILE = "cut.json"


def _highest(buckets: np.ndarray) -> np.ndarray:
    return buckets.max(axis=0)


def _mean_rounded_half_up(buckets: np.ndarray) -> np.ndarray:
    """floor(mean + 1/2), in integers so that no float decides a tie: 2.5 is 3, 2.49 is 2."""
    return (2 * buckets.sum(axis=0) + len(buckets)) // (2 * len(buckets))


# How the models' buckets (one row per model) make a document's quality_bucket.
ENSEMBLES = {"max": _highest, "mean": _mean_rounded_half_up}

QUALITY_OPTIONS = (
    RunOption("quality_model", "Score every document with a fastText classifier (.bin or .ftz), given a name: the "
              "document's NAME field is the model's probability of --quality-label, as DCLM computes it. Repeatable; "
              "the models are copied into the checkpoint and pinned by their digests.", "named-files", QUALITY,
              metavar="NAME=FILE", sets="models"),
    RunOption("quality_column", "Use a score the documents already carry (a column of the run selected from, as a "
              "--quality-model wrote it) as a model's, for --keep-top-fraction and --quality-buckets: a selection ranks "
              "the whole run without scoring again; comma-separated.", "list", QUALITY, metavar="NAME", sets="columns"),
    RunOption("quality_label", "The label whose probability the quality models give.", group=QUALITY, sets="label"),
    RunOption("quality_threshold", "Keep the documents whose score NAME is at least T (NAME=T; DCLM-Baseline: "
              "0.018112), or at most T (NAME<=T: a score that means harm); repeatable, a name may have both.",
              "named-bounds", QUALITY, metavar="NAME=T|NAME<=T", sets="thresholds"),
    RunOption("keep_top_fraction", "Keep the documents whose score NAME is in the top F of the whole run (of the "
              "documents it keeps: after dedup), as phases after the others; repeatable.", "named-numbers", QUALITY,
              minimum=0, minimum_open=True, maximum=1, metavar="NAME=F", sets="top_fractions"),
    RunOption("quality_buckets", "Give each document NAME_bucket: which of N run-wide percentile buckets of each "
              "model's scores it is in (0 lowest; weighted by tokens with --tokenize), and quality_bucket, the models' "
              "buckets combined by --quality-ensemble (Nemotron-CC: 20, max).", "int", QUALITY, minimum=2, metavar="N",
              sets="buckets"),
    RunOption("quality_ensemble", "How quality_bucket combines the models' buckets: the highest (max, as Nemotron-CC), "
              "or their mean rounded half up (mean: buckets 2 and 3 give 3, and 0, 4 and 1 give 2).", "choice", QUALITY,
              choices=tuple(ENSEMBLES), sets="ensemble"),
    RunOption("partition_by_bucket", "Write the output under bucket=KK/ directories by quality_bucket.", "flag",
              QUALITY),
)


def score_bins(scores: np.ndarray) -> np.ndarray:
    """Each score's bin of ``BINS`` over [0, 1] (exact: ``scores * BINS`` is)."""
    import numpy as np

    return np.clip(np.floor(scores * BINS), 0, BINS).astype(np.uint32)


@dataclass(frozen=True)
class ScoreHistogram:
    """Documents and tokens by score bin, the bins sorted and distinct."""

    bins: np.ndarray
    documents: np.ndarray
    tokens: np.ndarray

    @classmethod
    def of(cls, bins: np.ndarray, tokens: np.ndarray) -> ScoreHistogram:
        import numpy as np

        distinct, inverse = np.unique(bins, return_inverse=True)
        return cls(distinct.astype(np.uint32), np.bincount(inverse, minlength=len(distinct)).astype(np.int64),
                   np.bincount(inverse, weights=tokens, minlength=len(distinct)).astype(np.int64))

    @classmethod
    def merged(cls, parts: list[ScoreHistogram]) -> ScoreHistogram:
        import numpy as np

        if not parts:
            return cls(np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.int64))
        bins = np.concatenate([p.bins for p in parts])
        distinct, inverse = np.unique(bins, return_inverse=True)
        documents = np.bincount(inverse, weights=np.concatenate([p.documents for p in parts]), minlength=len(distinct))
        tokens = np.bincount(inverse, weights=np.concatenate([p.tokens for p in parts]), minlength=len(distinct))
        return cls(distinct.astype(np.uint32), documents.astype(np.int64), tokens.astype(np.int64))

    def top_cut(self, fraction: float) -> tuple[int, int]:
        """The bin at and above which the documents come closest to ``fraction`` of them
        all, and how many documents that keeps."""
        import numpy as np

        if not len(self.bins):
            return 0, 0
        kept_from = np.cumsum(self.documents[::-1])[::-1]
        chosen = int(np.argmin(np.abs(kept_from - fraction * kept_from[0])))
        return int(self.bins[chosen]), int(kept_from[chosen])

    def edges(self, buckets: int, by_tokens: bool) -> list[int]:
        """The ``buckets - 1`` bins where run-wide percentile buckets start (1 to N-1): the
        weight below each comes closest to k/N of the whole."""
        import numpy as np

        weights = self.tokens if by_tokens else self.documents
        if not len(self.bins) or not weights.sum():
            return [0] * (buckets - 1)
        below = np.cumsum(weights) - weights
        total = float(weights.sum())
        return [int(self.bins[np.argmin(np.abs(below - total * k / buckets))]) for k in range(1, buckets)]


@dataclass(frozen=True)
class ScoreCounts(Counts):
    documents: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class CutCounts(Counts):
    documents: int = 0
    thresholds: dict[str, float] = breakdown("Run-wide thresholds (--keep-top-fraction)")
    rank_errors: dict[str, float] = breakdown("Kept fraction minus the fraction asked (percentage points)")


@dataclass(frozen=True)
class SelectionCounts(Counts):
    rows_in: int = 0
    rows_out: int = 0
    removed: int = 0
    documents_by_bucket: dict[str, int] = breakdown("Documents by quality_bucket")


def _planned_when_run_wide(settings: PhaseSettings, elements: ShardRange) -> ShardRange | None:
    quality = settings.get(QUALITY)
    return elements if quality is not None and quality.selects_run_wide else None


class QualityScores(Phase):
    """The first of the quality phases: it brings their settings and options, and has the
    first phase score each document as it is written."""

    name = SCORES
    needs = (OUTPUT,)  # the documents the run keeps
    noun = SHARD
    counts = ScoreCounts
    matching_elements = True
    settings_key = QUALITY
    settings_type = QualitySettings
    options = QUALITY_OPTIONS
    also_enabled_by = ("quality_column",)
    run_values = ("dedup",)  # with the paragraph step, the models score after it (``LateScores``)

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return _planned_when_run_wide(settings, shards)

    def before_writer(self, settings: QualitySettings, options: Any) -> list:
        from ...stages.classifiers import QualityScorer

        return [QualityScorer.of(settings, options.text_field)] if settings.scores_in_first_phase else []

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import io

        import numpy as np

        from ...formats import reader_for

        names = context.settings_of(self).names
        reader, directory = reader_for(context.output_format), context.input_dir(self)
        parts: dict[str, list[ScoreHistogram]] = {name: [] for name in names}
        documents = tokens = 0
        files = context.input_files(self, index)
        for done, relative in enumerate(files):
            context.tick(done, len(files))
            path = joined(directory, relative)
            with fetched(path) as local:
                tables = list(reader.read_columns(str(local), (*names, TOKEN_COUNT)))
            for table in tables:
                weights = _column(table, TOKEN_COUNT, path, required=False)
                for name in names:
                    parts[name].append(ScoreHistogram.of(score_bins(_column(table, name, path)), weights))
                documents, tokens = documents + table.num_rows, tokens + int(weights.sum())
        arrays = {}
        for name, found in parts.items():
            merged = ScoreHistogram.merged(found)
            arrays.update({f"{name}.bins": merged.bins, f"{name}.documents": merged.documents,
                           f"{name}.tokens": merged.tokens})
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        _write(self.layout_of(context.layout).data_path(index, ".npz"), buffer.getvalue())
        return PhaseResult(ScoreCounts(documents, tokens))


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, data)


def _column(table, name: str, path: Path, required: bool = True) -> np.ndarray:
    """A numeric column as float64 values (a JSONL reader gives strings); a missing optional
    column is zeros, a missing or null score an error naming the file."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if name not in table.column_names or table[name].null_count == table.num_rows:
        if not required:
            return np.zeros(table.num_rows)
        raise CuratorArrayError(f"{path}: no score {name!r} (was the file written by this run's first phase?)")
    column = table[name]
    if column.null_count:
        raise CuratorArrayError(f"{path}: {column.null_count} document(s) without a score {name!r}")
    return pc.cast(column, pa.float64()).to_numpy()


def read_histograms(context: PhaseContext, names: tuple[str, ...]) -> dict[str, ScoreHistogram]:
    """Every shard's histograms, merged per model."""
    import numpy as np

    data = context.phase_layout(SCORES)
    parts: dict[str, list[ScoreHistogram]] = {name: [] for name in names}
    for shard in context.elements(SCORES):
        with np.load(data.data_path(shard, ".npz")) as saved:
            for name in names:
                parts[name].append(ScoreHistogram(saved[f"{name}.bins"], saved[f"{name}.documents"],
                                                  saved[f"{name}.tokens"]))
    return {name: ScoreHistogram.merged(found) for name, found in parts.items()}


class QualityCut(Phase):
    name = CUT
    needs = (SCORES,)
    counts = CutCounts
    settings_key = QUALITY

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return _planned_when_run_wide(settings, ShardRange(1))

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        settings = context.settings_of(self)
        histograms = read_histograms(context, settings.names)
        by_tokens = any(planned.name == TOKENIZE for planned in context.plan)
        models, thresholds, errors, documents = {}, {}, {}, 0
        for name, histogram in histograms.items():
            documents = int(histogram.documents.sum())
            entry: dict[str, Any] = {"documents": documents, "tokens": int(histogram.tokens.sum())}
            if name in settings.top_fractions:
                fraction = settings.top_fractions[name]
                threshold_bin, kept = histogram.top_cut(fraction)
                error = round((kept / documents - fraction) * 100, 6) if documents else 0.0
                entry.update(top_fraction=fraction, threshold=threshold_bin / BINS, threshold_bin=threshold_bin,
                             kept_documents=kept, rank_error_pp=error)
                thresholds[name], errors[name] = threshold_bin / BINS, error
            if settings.buckets:
                edges = histogram.edges(settings.buckets, by_tokens)
                entry.update(bucket_edge_bins=edges, bucket_edges=[edge / BINS for edge in edges])
            models[name] = entry
        _write(self.layout_of(context.layout).data_dir / CUT_FILE,
               dump_json({"bins": BINS, "weighted_by": "tokens" if by_tokens else "documents",
                          "buckets": settings.buckets, "models": models}))
        return PhaseResult(CutCounts(documents, thresholds, errors))


def read_cut(context: PhaseContext) -> dict[str, Any]:
    """The run's pinned thresholds and bucket edges (``cut.json``)."""
    path = context.phase_layout(CUT).data_dir / CUT_FILE
    return json.loads(path.read_text(encoding="utf-8"))


class QualitySelection(Phase):
    name = SELECTION
    needs = (CUT,)
    noun = SHARD
    counts = SelectionCounts
    settings_key = QUALITY
    output_staged = True
    staging_dir = ".selected"

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return _planned_when_run_wide(settings, shards)

    def files_written(self, context: PhaseContext, shard: int) -> tuple[str, ...]:
        path = self.layout_of(context.layout).data_path(shard, ".json")
        return tuple(json.loads(path.read_text(encoding="utf-8"))["files"])

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import numpy as np

        from ...formats import reader_for, writer_for

        settings, cut = context.settings_of(self), read_cut(context)["models"]
        source_dir, target_dir = context.input_dir(self), context.written_dir(self)
        reader = reader_for(context.output_format)
        writer = writer_for(context.output_format, target_dir)
        audit = writer_for(context.output_format, joined(context.output_dir, QUALITY_REMOVED_DIR))
        width = max(2, len(str((settings.buckets or 1) - 1)))
        written, counts = [], SelectionCounts()
        files = context.input_files(self, index)
        for done, relative in enumerate(files):
            context.tick(done, len(files))
            source = joined(source_dir, relative)
            bins = {name: [] for name in settings.names}
            with fetched(source) as local:
                tables = list(reader.read_columns(str(local), settings.names))
            for table in tables:
                for name in settings.names:
                    bins[name].append(score_bins(_column(table, name, source)))
            bins = {name: np.concatenate(found) if found else np.zeros(0, np.uint32) for name, found in bins.items()}
            rows = len(next(iter(bins.values())))
            keep = np.ones(rows, bool)
            for name in settings.top_fractions:
                keep &= bins[name] >= cut[name]["threshold_bin"]
            added, best = {}, np.zeros(rows, np.int64)
            if settings.buckets:
                buckets = np.stack([np.searchsorted(np.asarray(cut[name]["bucket_edge_bins"]), bins[name], side="right")
                                    for name in settings.names]).astype(np.int64)
                best = ENSEMBLES[settings.ensemble](buckets)
                for name, bucket in zip(settings.names, buckets):
                    added[f"{name}_bucket"] = (dict(enumerate(bucket.tolist())), None)
                added[BEST_BUCKET] = (dict(enumerate(best.tolist())), None)
            removed = set(np.flatnonzero(~keep).tolist())
            if settings.partition_by_bucket:
                for bucket in np.unique(best[keep]).tolist():
                    name = f"bucket={bucket:0{width}d}/{relative}"
                    writer.rewrite(source, joined(target_dir, name), reader, set(np.flatnonzero(keep & (best == bucket)).tolist()),
                                   only=True, added=added)
                    written.append(name)
            else:
                writer.rewrite(source, joined(target_dir, relative), reader, removed, added=added)
                written.append(relative)
            if removed and context.request.options.keep_removed:
                audit.rewrite(source, joined(context.output_dir, f"{QUALITY_REMOVED_DIR}/{relative}"), reader, removed, only=True,
                              added=added)
            by_bucket = ({f"{b:0{width}d}": int(n) for b, n in zip(*np.unique(best[keep], return_counts=True))}
                         if settings.buckets else {})
            counts = counts + SelectionCounts(rows, int(keep.sum()), len(removed), by_bucket)
        _write(self.layout_of(context.layout).data_path(index, ".json"), dump_json({"files": written}))
        return PhaseResult(counts)

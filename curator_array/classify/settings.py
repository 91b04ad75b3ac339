"""The run's quality classifiers and how documents are selected by their scores, as the run
options give them and the pipeline fingerprint pins them (``quality_model``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.errors import ConfigError
from ..core.file_digests import file_digest
from ..core.option_kinds import split_bound
from ..core.options import split_named
from ..core.pinned_settings import PinnedSettings
from .model import DEFAULT_QUALITY_LABEL

QUALITY = "quality_model"  # the fingerprint key, and the option that turns the quality phases on


def named(items: tuple[str, ...], read=str) -> dict[str, Any]:
    """``NAME=VALUE`` items (as run options keep them) by name."""
    return {name: read(value) for name, value in map(split_named, items)}


@dataclass(frozen=True)
class QualitySettings(PinnedSettings):
    """The run's quality models (``paths`` by name here; read back from ``run.json`` they are
    known by their ``digests`` alone), their label, and how documents are selected by their
    scores: at least a threshold (``thresholds``) or at most a ceiling (``ceilings``: a score
    that means harm), in the first phase; in the best fraction of
    the whole run (``top_fractions``), in run-wide percentile ``buckets`` (written under
    ``bucket=KK/`` with ``partition_by_bucket``), the models' buckets combined into one by
    ``ensemble`` (``run.phases.quality.ENSEMBLES``)."""

    digests: dict[str, str]
    paths: dict[str, str] = field(default_factory=dict, compare=False)
    label: str = DEFAULT_QUALITY_LABEL
    binary: bool = True  # every model has two labels (else a label's own probability is used)
    thresholds: dict[str, float] = field(default_factory=dict)
    top_fractions: dict[str, float] = field(default_factory=dict)
    buckets: int | None = None
    partition_by_bucket: bool = False
    ensemble: str = "max"
    ceilings: dict[str, float] = field(default_factory=dict)
    columns: tuple[str, ...] = ()  # scores the documents carry already (a selection's input), used as models' are
    # The models score the documents after the run's paragraph dedup (DCLM-Baseline's order),
    # in a phase of their own, instead of in the first phase.
    after_dedup: bool = False

    UNPINNED: ClassVar[tuple[str, ...]] = ("paths",)
    LATER: ClassVar[dict[str, Any]] = {"ensemble": "max", "ceilings": {}, "columns": (), "after_dedup": False}
    OPTION_DEFAULTS: ClassVar[dict[str, Any]] = {"models": (), "thresholds": (), "top_fractions": ()}

    @property
    def names(self) -> tuple[str, ...]:
        """Every score the run selects by: each model's, then each column's."""
        return (*self.digests, *self.columns)

    @property
    def selects_run_wide(self) -> bool:
        """Whether phases after the first select from the whole run's scores."""
        return bool(self.top_fractions) or self.buckets is not None

    @property
    def scores_in_first_phase(self) -> bool:
        return bool(self.digests) and not self.after_dedup

    @classmethod
    def from_options(cls, given: Mapping[str, Any]) -> QualitySettings:
        """The settings the run options give, each model checked: a file fastText reads,
        whose labels include the quality label. ConfigError names what is wrong."""
        from .model import header_labels

        paths = named(given.get("models") or ())
        label = given.get("label") or DEFAULT_QUALITY_LABEL
        binary = True
        for name, path in paths.items():
            labels = header_labels(path)
            if label not in labels:
                raise ConfigError(f"--quality-model {name}={path}: its labels are {', '.join(labels)}, not "
                                  f"{label} (--quality-label names the label to score)")
            binary = binary and len(labels) == 2
        bounds = [split_bound(item) for item in given.get("thresholds") or ()]
        settings = cls({name: file_digest(path) for name, path in paths.items()}, paths, label, binary,
                       {name: value for name, way, value in bounds if way == ">="},
                       named(given.get("top_fractions") or (), float), given.get("buckets"),
                       bool(given.get("partition_by_bucket")), given.get("ensemble") or "max",
                       {name: value for name, way, value in bounds if way == "<="}, tuple(given.get("columns") or ()),
                       bool(paths) and _has_paragraph_dedup(given.get("dedup")))
        twice = sorted(set(paths) & set(settings.columns))
        if twice:
            raise ConfigError(f"--quality-column {twice[0]}: a --quality-model is named so too; name one of them "
                              "otherwise")
        for option, chosen, known in (
                ("--quality-threshold", {**settings.thresholds, **settings.ceilings}, set(paths)),
                ("--keep-top-fraction", settings.top_fractions, set(settings.names))):
            unknown = sorted(set(chosen) - known)
            if unknown:
                column = " (a --quality-column is chosen by with --where)" if unknown[0] in settings.columns else ""
                raise ConfigError(f"{option} {unknown[0]}=...: no --quality-model is named {unknown[0]}{column} "
                                  f"(the models are {', '.join(paths) or 'none'})")
        if settings.columns and not settings.selects_run_wide:
            raise ConfigError(f"--quality-column {settings.columns[0]}: it is for --keep-top-fraction and "
                              "--quality-buckets (to choose by a score alone, use --where)")
        if settings.partition_by_bucket and settings.buckets is None:
            raise ConfigError("--partition-by-bucket needs --quality-buckets N (the buckets to write under)")
        if settings.ensemble != "max" and settings.buckets is None:
            raise ConfigError(f"--quality-ensemble {settings.ensemble} needs --quality-buckets N (the buckets it combines)")
        return settings


def _has_paragraph_dedup(dedup: str | None) -> bool:
    """Whether ``--dedup``'s value (checked by its option) has the paragraph step: DCLM
    scores after it."""
    return "paragraphs" in str(dedup or "").split(",")

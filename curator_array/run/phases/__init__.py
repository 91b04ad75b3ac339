"""The phases of a run, in their order: one file each, one line each in ``PHASES``.

A phase (``core.phase.Phase``) declares its name, the phases it reads, its elements in a
run, its counts, the settings it is planned by and the run options that set them, and
does its work in its own file; the first is a ``RootPhase`` (the spec's shards). Where
several phases read the same data, ``layouts`` says where it lives. Everything else
(``run``, ``submit``, ``retry``, ``status``, the report, the option table) loops over this
registry and never names a phase. A run's phases are those whose elements for its settings
are not None, in this order; adding a phase is one new file here and one line below.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from ...core.errors import ConfigError
from ...core.fingerprint import PipelineFingerprint
from ...core.layout import CheckpointLayout
from ...core.options import RunOption
from ...core.phase import OutputChain, Phase, PhaseSettings, PhaseState, PlannedPhase, RootPhase
from ...core.phase_states import phase_states
from ...core.run_contract import RunConfig, read_run_config
from ...core.sharding import ShardRange
from .buckets import Buckets
from .clusters import Clusters
from .components import Components
from .curation import Curation
from .decontamination import Decontamination
from .labels import LabelModels
from .late_scores import LateScores
from .paragraph_buckets import ParagraphBuckets
from .paragraph_ngrams import ParagraphNGrams
from .paragraph_removal import ParagraphRemoval
from .quality import QualityCut, QualityScores, QualitySelection
from .removal import Removal
from .signatures import Signatures
from .stats import CorpusStats, ShardStats
from .tokenize import Tokenize
from .tokens import TokenFiles
from .url_buckets import UrlBuckets
from .url_keys import UrlKeys
from .url_removal import UrlRemoval


class PhaseRegistry:
    """The phases in their order; the first is the root (the spec's shards)."""

    def __init__(self, phases: Iterable[Phase]):
        self._phases = list(phases)
        if not self._phases or not isinstance(self._phases[0], RootPhase):
            raise ValueError("the first phase of a run is a RootPhase: its elements are the run's shards")

    def __iter__(self) -> Iterator[Phase]:
        return iter(self._phases)

    @property
    def root(self) -> Phase:
        return self._phases[0]

    def get(self, name: str) -> Phase:
        for phase in self._phases:
            if phase.name == name:
                return phase
        raise ConfigError(f"--phase {name!r}: no such phase (the phases are {', '.join(p.name for p in self)})")

    def register(self, phase: Phase, before: str | None = None) -> None:
        """Add a phase after the others, or ``before`` the phase so named (a plugin's, or a test's)."""
        if any(p.name == phase.name for p in self._phases):
            raise ValueError(f"a phase named {phase.name!r} is registered already")
        position = [p.name for p in self._phases].index(before) if before else len(self._phases)
        self._phases.insert(position, phase)

    def unregister(self, name: str) -> None:
        self._phases = [p for p in self._phases if p.name != name]

    def _bringing_settings(self) -> list[Phase]:
        """The phases that bring settings (and their options), one per settings key."""
        return [phase for phase in self._phases if phase.settings_type is not None]

    def settings_keys(self) -> set[str]:
        return {phase.settings_key for phase in self._bringing_settings()}

    def options(self) -> list[RunOption]:
        """The run options the phases bring, each with the default of the field it sets."""
        rows = []
        for phase in self._bringing_settings():
            defaults = phase.settings_type.field_defaults()
            rows += [replace(option, default=defaults.get(option.field)) for option in phase.options]
        return rows

    def enabling_flag(self, phase: Phase) -> str:
        """The flag that adds ``phase`` to a run (the option named as its settings), for messages."""
        for bringer in self._bringing_settings():
            for option in bringer.options:
                if option.name == phase.settings_key == bringer.settings_key:
                    return option.flag
        return ""

    def _with_staging(self, by_key: dict[str, Any]) -> PhaseSettings:
        """The settings, saying whether a phase after the first rewrites the output."""
        planned = self.plan(PhaseSettings(by_key), ShardRange(1))
        return PhaseSettings(by_key, OutputChain.of([item.phase for item in planned]).staged)

    def settings_from_options(self, values: Mapping[str, Any]) -> PhaseSettings:
        """The settings the run options ``values`` (option name → value) give the phases: a
        group of phases is in the run when the option named as its settings key is set."""
        by_key = {}
        for phase in self._bringing_settings():
            if not phase.enabled_by(values):
                _refuse_without_enabling(phase, values)
                continue
            if phase.enabled_by(values):
                given = {option.field: values[option.name] for option in phase.options
                         if values.get(option.name) is not None}
                given.update({name: values.get(name) for name in phase.run_values})
                by_key[phase.settings_key] = phase.settings_type.from_options(given)
        if values.get("annotate"):
            self._refuse_later_phases_of_annotated(PhaseSettings(by_key))
        return self._with_staging(by_key)

    def _refuse_later_phases_of_annotated(self, settings: PhaseSettings) -> None:
        """An annotated run's output holds the documents a rule only marked: a later phase
        would dedup, rank or tokenize them as kept. Those phases belong to the selection."""
        later = [item.phase for item in self.plan(settings, ShardRange(1))][1:]
        if later:
            flag = self.enabling_flag(later[0]) or later[0].name
            raise ConfigError(f"--annotate does not combine with {flag} yet: the {later[0].name} phase would treat "
                              "the documents a rule only marked as kept")

    def settings_of(self, fingerprint: PipelineFingerprint | Mapping[str, Any] | None) -> PhaseSettings:
        """The settings a pipeline fingerprint pins (``run.json``), or a mapping of them by key."""
        pinned = fingerprint.phases if isinstance(fingerprint, PipelineFingerprint) else (fingerprint or {})
        by_key = {phase.settings_key: phase.settings_type.from_json(pinned[phase.settings_key])
                  for phase in self._bringing_settings() if isinstance(pinned.get(phase.settings_key), Mapping)}
        return self._with_staging(by_key)

    def before_writer(self, options: Any) -> list:
        """What the run's later phases need the first phase to do to each document just
        before it is written (``options``: the pipeline options, with their phase settings)."""
        by_key, stages = options.phases.by_key, []
        for phase in self._phases:
            settings = by_key.get(phase.settings_key)
            stages += phase.before_writer(settings, options) if settings is not None else []
        return stages

    def plan(self, settings: PhaseSettings, shards: ShardRange) -> list[PlannedPhase]:
        """The phases of a run with ``settings`` and ``shards``, each with its elements."""
        planned = []
        for phase in self._phases:
            elements = phase.elements(settings, shards)
            if elements is not None:
                planned.append(PlannedPhase(phase, elements))
        return planned

    def check(self, settings: PhaseSettings, shards: ShardRange) -> None:
        """Refuse settings a phase of the run cannot work with, before any of its elements starts
        (a phase without elements of its own, whose settings the run has, too)."""
        planned = [item.phase for item in self.plan(settings, shards)]
        for phase in self._phases:
            if phase in planned or (phase.settings_type is not None and settings.get(phase.settings_key) is not None
                                    and phase.elements(settings, shards) is None):
                phase.check(settings)

    def plan_of(self, run: RunConfig) -> list[PlannedPhase]:
        """The phases of a run as its ``run.json`` pins them."""
        return self.plan(self.settings_of(run.pipeline), run.shards)

    def states(self, layout: CheckpointLayout) -> list[PhaseState]:
        """Every phase of the checkpoint's run with its complete and missing elements."""
        run = read_run_config(layout)
        return phase_states(layout, run, self.plan_of(run))


def _refuse_without_enabling(phase: Phase, values: Mapping[str, Any]) -> None:
    """A value of one of ``phase``'s options is refused when the option that turns its phases
    on is not given: it would do nothing, and a run silently without it is worse."""
    defaults = phase.settings_type.field_defaults()
    for option in phase.options:
        given = values.get(option.name)
        if option.name not in (phase.settings_key, *phase.also_enabled_by) and \
                given not in (None, (), False, defaults.get(option.field)):
            enabling = next(o.flag for o in phase.options if o.name == phase.settings_key)
            raise ConfigError(f"{option.flag} {option.show(given)}: it needs {enabling}")


PHASES = PhaseRegistry([
    Curation(),
    Decontamination(),
    UrlKeys(),
    UrlBuckets(),
    UrlRemoval(),
    ParagraphNGrams(),
    ParagraphBuckets(),
    ParagraphRemoval(),
    Signatures(),
    Buckets(),
    Clusters(),
    Components(),
    Removal(),
    LateScores(),
    QualityScores(),
    LabelModels(),
    QualityCut(),
    QualitySelection(),
    Tokenize(),
    TokenFiles(),
    ShardStats(),
    CorpusStats(),
])

"""The phases of a run, in their order: one file each, one line each in ``PHASES``.

A phase (``core.phase.Phase``) declares its name, the phases it reads, its elements in a
run and its counts, and does its work in its own file. Everything else (``run``,
``submit``, ``retry``, ``status``, the report) loops over this registry and never names a
phase. A run's phases are those whose elements for its settings are not None, in this
order; adding a phase is one new file here and one line below.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ...core.errors import ConfigError
from ...core.layout import CheckpointLayout
from ...core.phase import Phase, PlannedPhase
from ...core.phase_states import PhaseState, phase_states
from ...core.run_contract import RunConfig, read_run_config
from ...core.sharding import ShardRange
from ...pipelines.phase_settings import PhaseSettings
from .buckets import Buckets
from .clusters import Clusters
from .components import Components
from .curation import Curation
from .removal import Removal
from .signatures import Signatures
from .tokenize import Tokenize
from .tokens import TokenFiles


class PhaseRegistry:
    """The phases in their order; the first is the root (the spec's shards)."""

    def __init__(self, phases: Iterable[Phase]):
        self._phases = list(phases)

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

    def register(self, phase: Phase) -> None:
        """Add a phase after the others (a plugin's, or a test's)."""
        if any(p.name == phase.name for p in self._phases):
            raise ValueError(f"a phase named {phase.name!r} is registered already")
        self._phases.append(phase)

    def unregister(self, name: str) -> None:
        self._phases = [p for p in self._phases if p.name != name]

    def plan(self, settings: PhaseSettings, shards: ShardRange) -> list[PlannedPhase]:
        """The phases of a run with ``settings`` and ``shards``, each with its elements."""
        planned = []
        for phase in self._phases:
            elements = phase.elements(settings, shards)
            if elements is not None:
                planned.append(PlannedPhase(phase, elements))
        return planned

    def check(self, settings: PhaseSettings, shards: ShardRange) -> None:
        """Refuse settings a phase of the run cannot work with, before any of its elements starts."""
        for planned in self.plan(settings, shards):
            planned.phase.check(settings)

    def plan_of(self, run: RunConfig) -> list[PlannedPhase]:
        """The phases of a run as its ``run.json`` pins them."""
        return self.plan(PhaseSettings.of_fingerprint(run.pipeline), run.shards)

    def states(self, layout: CheckpointLayout) -> list[PhaseState]:
        """Every phase of the checkpoint's run with its complete and missing elements."""
        run = read_run_config(layout)
        return phase_states(layout, run, self.plan_of(run))


PHASES = PhaseRegistry([
    Curation(),
    Signatures(),
    Buckets(),
    Clusters(),
    Components(),
    Removal(),
    Tokenize(),
    TokenFiles(),
])

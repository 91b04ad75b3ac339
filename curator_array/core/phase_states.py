"""Every phase of a run as its records show it: which elements are complete, which failed,
and which earlier phase an incomplete one waits for. What status, retry and the report
compute, from the run's phase plan (``phase.PlannedPhase``) and its checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce

from .checkpoint import scan_completion_manifests
from .layout import CheckpointLayout
from .phase import Counts, Phase, PlannedPhase
from .records.phase import PhaseManifest, phase_failures, phase_manifests
from .run_contract import RunConfig
from .sharding import ShardRange


@dataclass(frozen=True)
class PhaseState:
    """One phase of a run as its records show it."""

    phase: Phase
    elements: ShardRange
    complete: tuple[int, ...]
    failed: dict[int, str]  # element → the latest recorded reason, for incomplete elements
    manifests: dict[int, PhaseManifest] = field(default_factory=dict)
    progress: str | None = None  # how far an incomplete phase of steps has gone (``Phase.progress``)

    @property
    def name(self) -> str:
        return self.phase.name

    @property
    def missing(self) -> tuple[int, ...]:
        done = set(self.complete)
        return tuple(i for i in self.elements if i not in done)

    @property
    def is_complete(self) -> bool:
        return not self.missing

    def totals(self) -> Counts:
        """What its complete elements counted together."""
        return reduce(lambda a, b: a + b, (m.counts for m in self.manifests.values()), self.phase.counts())

    def rate(self) -> float | None:
        """Its counts' ``RATE`` figure per second of its complete elements' time, if it has one."""
        figure = self.phase.counts.RATE
        seconds = sum(m.duration_s or 0.0 for m in self.manifests.values())
        return getattr(self.totals(), figure) / seconds if figure and seconds else None


def phase_states(layout: CheckpointLayout, run: RunConfig, plan: Sequence[PlannedPhase],
                 root_complete: set[int] | None = None) -> list[PhaseState]:
    """Every phase of the plan; the root's completion comes from the spec's manifests
    (``root_complete``, when the caller has read them already)."""
    states = []
    for planned in plan:
        phase, elements = planned.phase, planned.elements
        if phase.is_root:
            done = root_complete if root_complete is not None else scan_completion_manifests(layout, run).shards
            states.append(PhaseState(phase, elements, tuple(sorted(s for s in done if s in elements)), {}))
            continue
        phase_layout = phase.layout_of(layout)
        manifests = phase_manifests(phase_layout, run.run_id, phase.counts)
        failed = {f.index: f.error for _, f in phase_failures(phase_layout)
                  if f.index not in manifests and f.index in elements}
        complete = tuple(i for i in elements if i in manifests)
        progress = phase.progress(phase_layout, run.run_id, elements.total) if len(complete) < elements.total else None
        states.append(PhaseState(phase, elements, complete, failed,
                                 {i: m for i, m in manifests.items() if i in elements}, progress))
    return states


def blocked_by(states: Sequence[PhaseState], phase: Phase) -> PhaseState | None:
    """The earliest incomplete phase before ``phase`` (what it waits for), or None."""
    for state in states:
        if state.name == phase.name:
            return None
        if not state.is_complete:
            return state
    return None


def earliest_incomplete(states: Sequence[PhaseState]) -> PhaseState | None:
    return next((state for state in states if not state.is_complete), None)

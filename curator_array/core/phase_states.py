"""Every phase of a run as its records show it: which elements are complete, which failed,
and which earlier phase an incomplete one waits for. What status, retry and the report
compute, from the run's phase plan (``phase.PlannedPhase``) and its checkpoint."""

from __future__ import annotations

from collections.abc import Sequence

from .checkpoint import ManifestScan
from .layout import CheckpointLayout
from .phase import Phase, PhaseState, PlannedPhase
from .run_contract import RunConfig


def phase_states(layout: CheckpointLayout, run: RunConfig, plan: Sequence[PlannedPhase],
                 scan: ManifestScan | None = None) -> list[PhaseState]:
    """Every phase of the plan (``scan``: the run's completion manifests, when the caller has
    read them already)."""
    return [planned.phase.read_state(layout, run, planned.elements, scan) for planned in plan]


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

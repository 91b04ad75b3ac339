"""The settings of a run's phases after curation, as its pipeline fingerprint pins them.

A phase's elements in a run (``core.phase.Phase.elements``) follow from these: a run with
dedup settings has the dedup phases, one without has none. ``submit`` reads them from the
run options, ``status`` and ``retry`` from ``run.json``; both give the same value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..dedup.settings import DedupSettings

DEDUP = "dedup"


@dataclass(frozen=True)
class PhaseSettings:
    """One field per algorithm of the later phases; None where a run does not use it."""

    dedup: DedupSettings | None = None

    def fingerprint(self) -> dict[str, Any]:
        """What the pipeline fingerprint holds of these (nothing for a run without them)."""
        return {DEDUP: self.dedup.to_json()} if self.dedup is not None else {}

    @classmethod
    def of_fingerprint(cls, fingerprint: Mapping[str, Any] | None) -> PhaseSettings:
        payload = (fingerprint or {}).get(DEDUP)
        return cls(DedupSettings.from_json(payload) if isinstance(payload, Mapping) else None)

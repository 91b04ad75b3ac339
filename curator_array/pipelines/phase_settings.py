"""The settings of a run's phases after curation, as its pipeline fingerprint pins them.

A phase's elements in a run (``core.phase.Phase.elements``) follow from these: a run with
dedup settings has the dedup phases, one with tokenize settings the tokenize phases. ``submit`` reads them from the
run options, ``status`` and ``retry`` from ``run.json``; both give the same value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..dedup.settings import DedupSettings
from ..tokens.settings import TokenizeSettings

DEDUP, TOKENIZE = "dedup", "tokenize"


@dataclass(frozen=True)
class PhaseSettings:
    """One field per algorithm of the later phases; None where a run does not use it."""

    dedup: DedupSettings | None = None
    tokenize: TokenizeSettings | None = None

    KEYS: ClassVar[tuple[str, ...]] = (DEDUP, TOKENIZE)  # their keys in a pipeline fingerprint

    def fingerprint(self) -> dict[str, Any]:
        """What the pipeline fingerprint holds of these (nothing for a run without them)."""
        pinned = {DEDUP: self.dedup, TOKENIZE: self.tokenize}
        return {key: settings.to_json() for key, settings in pinned.items() if settings is not None}

    @classmethod
    def of_fingerprint(cls, fingerprint: Mapping[str, Any] | None) -> PhaseSettings:
        fingerprint = fingerprint or {}
        dedup, tokenize = fingerprint.get(DEDUP), fingerprint.get(TOKENIZE)
        return cls(DedupSettings.from_json(dedup) if isinstance(dedup, Mapping) else None,
                   TokenizeSettings.from_json(tokenize) if isinstance(tokenize, Mapping) else None)

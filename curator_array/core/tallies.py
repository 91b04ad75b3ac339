"""Tallies: counts by name that a run's first phase keeps beside its documents.

A tally (``lines_removed``: lines each line modifier took out; ``would_drop_any``: documents
each rule would drop, with ``--annotate``) is a mapping of keys (``<step>.<rule>``) to counts,
summed from task to record to manifest to run status. Each is a ``tally`` field of
``CurationCounts``, which gives the one letter a task record stores it under and the
title status and the report show it with, so that a new tally is one field and travels
through records, manifests, status and the report without any of them naming it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .curation_counts import TALLY, CurationCounts, tally_fields


@dataclass(frozen=True)
class Tally:
    name: str  # the key in manifests (their work) and in status --json
    record_key: str  # the key in a task record line (compact)


TALLIES: dict[str, Tally] = {item.name: Tally(item.name, item.metadata[TALLY]) for item in tally_fields()}


@dataclass(frozen=True)
class Tallies:
    """Counts by tally name, then by key; a tally without counts is absent."""

    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.counts) - set(TALLIES))
        if unknown:
            raise ValueError(f"no tally is declared as {unknown[0]!r} (core.tallies.TALLIES)")

    def of(self, name: str) -> dict[str, int]:
        return dict(self.counts.get(name, {}))

    def plus(self, name: str, counts: Mapping[str, int]) -> Tallies:
        """These tallies with ``counts`` added to tally ``name``."""
        merged = self.of(name)
        for key, count in counts.items():
            merged[key] = merged.get(key, 0) + count
        return Tallies({**self.counts, name: merged})

    def __add__(self, other: Tallies) -> Tallies:
        total = self
        for name, counts in other.counts.items():
            total = total.plus(name, counts)
        return total

    def __iter__(self) -> Iterator[tuple[Tally, dict[str, int]]]:
        """Each declared tally with its counts (empty when none), in declaration order."""
        return iter((tally, self.of(tally.name)) for tally in TALLIES.values())

    def __bool__(self) -> bool:
        return any(any(counts.values()) for counts in self.counts.values())

    def to_record(self) -> dict[str, dict[str, int]]:
        """The non-empty tallies under their record keys, for a task record line."""
        return {tally.record_key: counts for tally, counts in self if counts}

    @classmethod
    def from_record(cls, payload: Mapping[str, Any]) -> Tallies:
        return cls({tally.name: dict(payload[tally.record_key]) for tally in TALLIES.values()
                    if isinstance(payload.get(tally.record_key), Mapping)})

    def to_json(self, every: bool = False) -> dict[str, dict[str, int]]:
        """The tallies by name: the non-empty ones (a manifest), or ``every`` one (status)."""
        return {tally.name: counts for tally, counts in self if counts or every}

    @classmethod
    def of_counts(cls, counts: CurationCounts) -> Tallies:
        """The tallies the first phase's counts hold."""
        return cls({name: dict(found) for name in TALLIES if (found := getattr(counts, name))})

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Tallies:
        """The tallies in a JSON object that holds them by name beside other keys."""
        return cls({name: {str(k): int(v) for k, v in payload[name].items()} for name in TALLIES
                    if isinstance(payload.get(name), Mapping)})

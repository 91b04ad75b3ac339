"""The dedup phases of a run: which there are, how many elements each has, their records.

A run with ``--dedup exact|fuzzy`` has, after its curation phase (the spec's shards and
manifests, unchanged), four phases; each element of each phase is retried on its own:

    signatures  one element per curation shard: its documents' band keys
    buckets     ``buckets`` elements: the candidate pairs of the band keys ``key % buckets == b``
    clusters    one element: the pairs' connected components, the copies to remove per shard
    removal     one element per curation shard: its visible output files, without the copies

Their records sit beside the spec's, under the metadata directory::

    .dedup/<phase>/completed_<E>.json                  one per complete element
    .dedup/<phase>/attempts/<attempt>/element_<E>.json why an element's attempt ended early
    .dedup/<phase>/data/...                            what the element wrote (signatures,
                                                       pairs, removed rows), atomically

Pure: names, records and plans. The work is ``dedup``'s, the orchestration ``run.dedup``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import write_json_atomic
from .layout import AttemptId, CheckpointLayout, utc_now
from .records import JobIdentity, RecordError, _counts, _int, _number, _object, _text, read_record
from .sharding import ShardRange

CURATION = "curation"
PHASES = ("signatures", "buckets", "clusters", "removal")
MODES = ("exact", "fuzzy")
# What each phase's elements need complete before they start.
NEEDS = {"signatures": CURATION, "buckets": "signatures", "clusters": "buckets", "removal": "clusters"}


@dataclass(frozen=True)
class DedupSettings:
    """How a run removes duplicates; pinned in ``run.json`` with the pipeline's fingerprint.

    ``buckets`` None means one bucket element per curation shard. ``against`` names earlier
    runs' checkpoints whose documents this run's copies must not duplicate.
    """

    mode: str
    ngram: int = 5
    bands: int = 14
    rows: int = 8
    seed: int = 1
    buckets: int | None = None
    verify: bool = False
    threshold: float = 0.75
    against: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"dedup mode {self.mode!r} is not one of {', '.join(MODES)}")

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "ngram": self.ngram, "bands": self.bands, "rows": self.rows, "seed": self.seed,
                "buckets": self.buckets, "verify": self.verify, "threshold": self.threshold,
                "against": list(self.against)}

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> DedupSettings:
        known = cls.__dataclass_fields__
        values = {k: v for k, v in payload.items() if k in known}
        values["against"] = tuple(values.get("against") or ())
        return cls(**values)

    @classmethod
    def of_pipeline(cls, fingerprint: Mapping[str, Any] | None) -> DedupSettings | None:
        """The settings pinned with a pipeline fingerprint, or None for a run without dedup."""
        payload = (fingerprint or {}).get("dedup")
        return cls.from_json(payload) if isinstance(payload, Mapping) else None

    def signature_settings(self) -> dict[str, Any]:
        """What must be equal for two runs' signatures to be compared (``--dedup-against``)."""
        keys = ("mode",) if self.mode == "exact" else ("mode", "ngram", "bands", "rows", "seed")
        return {k: getattr(self, k) for k in keys}

    def bucket_count(self, shards: ShardRange) -> int:
        return self.buckets or shards.total

    def elements(self, phase: str, shards: ShardRange) -> ShardRange:
        """The element indices of ``phase``: curation shards for signatures and removal."""
        if phase in ("signatures", "removal", CURATION):
            return shards
        if phase == "buckets":
            return ShardRange(self.bucket_count(shards))
        if phase == "clusters":
            return ShardRange(1)
        raise ValueError(f"unknown phase {phase!r}")


@dataclass(frozen=True)
class PhaseLayout:
    """Where one phase's records and data live inside a checkpoint."""

    layout: CheckpointLayout
    phase: str

    @property
    def root(self) -> Path:
        return self.layout.dedup_root / self.phase

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def manifest_path(self, index: int) -> Path:
        return self.root / f"completed_{index}.json"

    def attempt_path(self, attempt: AttemptId, index: int) -> Path:
        return self.root / "attempts" / ".".join(attempt.parts) / f"element_{index}.json"

    def data_path(self, index: int, suffix: str = ".parquet") -> Path:
        noun = "bucket" if self.phase == "buckets" else "element" if self.phase == "clusters" else "shard"
        return self.data_dir / f"{noun}_{index}{suffix}"


@dataclass(frozen=True)
class PhaseManifest:
    """``completed_<E>.json``: one element of a dedup phase is complete, and what it did.

    ``counts`` holds the element's figures (documents, band keys, pairs, removed, rows in
    and out); ``cluster_sizes`` how many duplicate clusters have each size (clusters only).
    """

    phase: str
    index: int
    elements: int
    run_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    cluster_sizes: dict[str, int] = field(default_factory=dict)
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    peak_rss_mib: float | None = None
    attempt: str | None = None
    job: JobIdentity = field(default_factory=JobIdentity)

    @classmethod
    def from_json(cls, payload: Any) -> PhaseManifest:
        payload = _object(payload)
        if payload.get("status") != "completed":
            raise RecordError(f"status is {payload.get('status')!r}, not 'completed'")
        return cls(
            phase=str(payload.get("phase")), index=_int(payload, "index", None) or 0,
            elements=_int(payload, "elements", None) or 0, run_id=_text(payload, "run_id"),
            counts=_counts(payload, "counts"), cluster_sizes=_counts(payload, "cluster_sizes"),
            started_at=_text(payload, "started_at"), ended_at=_text(payload, "ended_at"),
            duration_s=_number(payload, "duration_s"), peak_rss_mib=_number(payload, "peak_rss_mib"),
            attempt=_text(payload, "attempt"), job=JobIdentity.from_json(payload.get("job") or {}),
        )

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "index": self.index, "elements": self.elements, "status": "completed",
                "run_id": self.run_id, "counts": dict(self.counts), "cluster_sizes": dict(self.cluster_sizes),
                "started_at": self.started_at, "ended_at": self.ended_at, "duration_s": self.duration_s,
                "peak_rss_mib": self.peak_rss_mib, "attempt": self.attempt, "job": self.job.to_json()}

    def write(self, layout: CheckpointLayout) -> Path:
        return write_json_atomic(PhaseLayout(layout, self.phase).manifest_path(self.index), self.to_json())


@dataclass(frozen=True)
class PhaseFailure:
    """Why one attempt at a phase element ended early (SIGKILL leaves none: manifests decide)."""

    phase: str
    index: int
    attempt: str
    error: str
    exit_code: int = 1
    job: JobIdentity = field(default_factory=JobIdentity)
    written_at: str | None = None

    @classmethod
    def from_json(cls, payload: Any) -> PhaseFailure:
        payload = _object(payload)
        return cls(str(payload.get("phase")), _int(payload, "index", None) or 0, str(payload.get("attempt", "?")),
                   str(payload.get("error", "")), _int(payload, "exit_code", 1) or 1,
                   JobIdentity.from_json(payload.get("job") or {}), _text(payload, "written_at"))

    def write(self, layout: CheckpointLayout, attempt: AttemptId) -> Path:
        return write_json_atomic(PhaseLayout(layout, self.phase).attempt_path(attempt, self.index), {
            "phase": self.phase, "index": self.index, "attempt": self.attempt, "error": self.error,
            "exit_code": self.exit_code, "job": self.job.to_json(), "written_at": self.written_at or utc_now()})


def phase_manifests(layout: CheckpointLayout, phase: str, run_id: str | None) -> dict[int, PhaseManifest]:
    """The complete elements of ``phase`` in this run (a manifest of another run does not count)."""
    root = PhaseLayout(layout, phase).root
    found: dict[int, PhaseManifest] = {}
    if not root.is_dir():
        return found
    for path in root.glob("completed_*.json"):
        try:
            manifest = read_record(PhaseManifest.from_json, path)
        except Exception:  # an unreadable manifest is an incomplete element
            continue
        if manifest.phase == phase and (run_id is None or manifest.run_id == run_id):
            found[manifest.index] = manifest
    return found


def phase_failures(layout: CheckpointLayout, phase: str) -> list[tuple[Path, PhaseFailure]]:
    root = PhaseLayout(layout, phase).root / "attempts"
    records = []
    for path in sorted(root.glob("*/element_*.json")) if root.is_dir() else ():
        try:
            records.append((path, read_record(PhaseFailure.from_json, path)))
        except Exception:
            continue
    return records


@dataclass(frozen=True)
class PhaseState:
    """One phase of a run as its records show it."""

    phase: str
    elements: ShardRange
    complete: tuple[int, ...]
    failed: dict[int, str]  # element → the latest recorded reason, for incomplete elements
    manifests: dict[int, PhaseManifest] = field(default_factory=dict)

    @property
    def missing(self) -> tuple[int, ...]:
        done = set(self.complete)
        return tuple(i for i in self.elements if i not in done)

    @property
    def is_complete(self) -> bool:
        return not self.missing

    def total(self, name: str) -> int:
        return sum(m.counts.get(name, 0) for m in self.manifests.values())


def phase_states(layout: CheckpointLayout, settings: DedupSettings, shards: ShardRange, run_id: str | None,
                 curation_complete: set[int]) -> list[PhaseState]:
    """Curation first (from the spec's manifests, given), then every dedup phase."""
    states = [PhaseState(CURATION, shards, tuple(sorted(curation_complete)), {})]
    for phase in PHASES:
        manifests = phase_manifests(layout, phase, run_id)
        elements = settings.elements(phase, shards)
        failed = {f.index: f.error for _, f in phase_failures(layout, phase)
                  if f.index not in manifests and f.index in elements}
        states.append(PhaseState(phase, elements, tuple(i for i in elements if i in manifests), failed,
                                 {i: m for i, m in manifests.items() if i in elements}))
    return states


def blocked_by(states: list[PhaseState], phase: str) -> PhaseState | None:
    """The earliest incomplete phase before ``phase`` (what it waits for), or None."""
    for state in states:
        if state.phase == phase:
            return None
        if not state.is_complete:
            return state
    return None

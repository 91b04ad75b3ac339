"""The records of the phases after the root: manifests, attempt records, where data lives.

Each element of such a phase is retried on its own. Their records sit beside the spec's,
under the metadata directory::

    .phases/<phase>/completed_<E>.json                  one per complete element
    .phases/<phase>/attempts/<attempt>/element_<E>.json why an element's attempt ended early
    .phases/<phase>/data/...                            what the elements wrote, atomically

The root phase keeps the spec's own records (``records.CompletionManifest``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import write_json_atomic
from .layout import AttemptId, CheckpointLayout, utc_now
from .phase import Counts, Phase
from .records import JobIdentity, RecordError, _int, _number, _object, _text, read_record


@dataclass(frozen=True)
class PhaseLayout:
    """Where one phase's records and data live inside a checkpoint."""

    layout: CheckpointLayout
    phase: Phase

    @property
    def root(self) -> Path:
        return self.layout.phases_root / self.phase.name

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def manifest_path(self, index: int) -> Path:
        return self.root / f"completed_{index}.json"

    def attempt_path(self, attempt: AttemptId, index: int) -> Path:
        return self.root / "attempts" / ".".join(attempt.parts) / f"element_{index}.json"

    def data_path(self, index: int, suffix: str = ".parquet") -> Path:
        return self.data_dir / f"{self.phase.noun}_{index}{suffix}"


@dataclass(frozen=True)
class PhaseManifest:
    """``completed_<E>.json``: one element of a phase is complete, and what it counted."""

    phase: str
    index: int
    elements: int
    run_id: str | None = None
    counts: Counts = field(default_factory=Counts)
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    peak_rss_mib: float | None = None
    attempt: str | None = None
    job: JobIdentity = field(default_factory=JobIdentity)

    @classmethod
    def from_json(cls, payload: Any, counts: type[Counts] = Counts) -> PhaseManifest:
        payload = _object(payload)
        if payload.get("status") != "completed":
            raise RecordError(f"status is {payload.get('status')!r}, not 'completed'")
        return cls(
            phase=str(payload.get("phase")), index=_int(payload, "index", None) or 0,
            elements=_int(payload, "elements", None) or 0, run_id=_text(payload, "run_id"),
            counts=counts.from_json(payload.get("counts")),
            started_at=_text(payload, "started_at"), ended_at=_text(payload, "ended_at"),
            duration_s=_number(payload, "duration_s"), peak_rss_mib=_number(payload, "peak_rss_mib"),
            attempt=_text(payload, "attempt"), job=JobIdentity.from_json(payload.get("job") or {}),
        )

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "index": self.index, "elements": self.elements, "status": "completed",
                "run_id": self.run_id, "counts": self.counts.to_json(), "started_at": self.started_at,
                "ended_at": self.ended_at, "duration_s": self.duration_s, "peak_rss_mib": self.peak_rss_mib,
                "attempt": self.attempt, "job": self.job.to_json()}

    def write(self, phase_layout: PhaseLayout) -> Path:
        return write_json_atomic(phase_layout.manifest_path(self.index), self.to_json())


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

    def write(self, phase_layout: PhaseLayout, attempt: AttemptId) -> Path:
        return write_json_atomic(phase_layout.attempt_path(attempt, self.index), {
            "phase": self.phase, "index": self.index, "attempt": self.attempt, "error": self.error,
            "exit_code": self.exit_code, "job": self.job.to_json(), "written_at": self.written_at or utc_now()})


def phase_manifests(phase_layout: PhaseLayout, run_id: str | None) -> dict[int, PhaseManifest]:
    """The complete elements of a phase in this run (a manifest of another run does not count)."""
    root, phase = phase_layout.root, phase_layout.phase
    found: dict[int, PhaseManifest] = {}
    if not root.is_dir():
        return found
    for path in root.glob("completed_*.json"):
        try:
            manifest = read_record(lambda payload: PhaseManifest.from_json(payload, phase.counts), path)
        except Exception:  # an unreadable manifest is an incomplete element
            continue
        if manifest.phase == phase.name and (run_id is None or manifest.run_id == run_id):
            found[manifest.index] = manifest
    return found


def phase_failures(phase_layout: PhaseLayout) -> list[tuple[Path, PhaseFailure]]:
    root = phase_layout.root / "attempts"
    records = []
    for path in sorted(root.glob("*/element_*.json")) if root.is_dir() else ():
        try:
            records.append((path, read_record(PhaseFailure.from_json, path)))
        except Exception:
            continue
    return records

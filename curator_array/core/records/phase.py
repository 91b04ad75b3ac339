"""The records of the elements of the phases after the first: each element's completion
manifest (``completed_<E>.json``, with its phase's typed counts) and why an attempt at one
ended early. Each element is retried on its own; where they live is ``layout.PhaseLayout``.
The first phase keeps the spec's own records (``shard.CompletionManifest``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import write_json_atomic
from ..counts import Counts
from ..layout import AttemptId, PhaseLayout, utc_now
from .attempt import JobIdentity
from .base import RecordError, json_object, plain_fields, read_fields, read_record


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
        payload = json_object(payload)
        if payload.get("status") != "completed":
            raise RecordError(f"status is {payload.get('status')!r}, not 'completed'")
        measured = read_fields(cls, payload, ("run_id", "started_at", "ended_at", "duration_s", "peak_rss_mib",
                                              "attempt", "job"))
        return cls(str(payload.get("phase")), read_fields(cls, payload, ("index",)).get("index", 0),
                   read_fields(cls, payload, ("elements",)).get("elements", 0),
                   counts=counts.from_json(payload.get("counts")), **measured)

    def to_json(self) -> dict[str, Any]:
        return {**plain_fields(self, ("phase", "index", "elements")), "status": "completed",
                **plain_fields(self, ("run_id", "counts", "started_at", "ended_at", "duration_s", "peak_rss_mib",
                                      "attempt", "job"))}

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
        payload = json_object(payload)
        return cls(str(payload.get("phase")), read_fields(cls, payload, ("index",)).get("index", 0),
                   str(payload.get("attempt", "?")), str(payload.get("error", "")),
                   **read_fields(cls, payload, ("exit_code", "job", "written_at")))

    def write(self, phase_layout: PhaseLayout, attempt: AttemptId) -> Path:
        return write_json_atomic(phase_layout.attempt_path(attempt, self.index),
                                 {**plain_fields(self), "written_at": self.written_at or utc_now()})


def phase_manifests(phase_layout: PhaseLayout, run_id: str | None, counts: type[Counts] = Counts
                    ) -> dict[int, PhaseManifest]:
    """The complete elements of a phase in this run (a manifest of another run does not count)."""
    root = phase_layout.root
    found: dict[int, PhaseManifest] = {}
    if not root.is_dir():
        return found
    for path in root.glob("completed_*.json"):
        try:
            manifest = read_record(lambda payload: PhaseManifest.from_json(payload, counts), path)
        except Exception:  # an unreadable manifest is an incomplete element
            continue
        if manifest.phase == phase_layout.name and (run_id is None or manifest.run_id == run_id):
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

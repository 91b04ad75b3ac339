"""The record of a submission: one line of ``submissions.jsonl`` per ``sbatch --array``
window that ``submit`` or ``retry --submit`` queued."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..sharding import ShardRange
from .base import RecordError, json_object, read_fields, require_int


@dataclass(frozen=True)
class SubmissionRecord:
    """One window that was queued. ``phase`` None is the first phase (the spec's shards), as
    lines written before phases were recorded say nothing."""

    job_id: str
    array: str
    offset: int
    shards: ShardRange
    request: str | None = None
    phase: str | None = None
    submitted_at: float | None = None

    @classmethod
    def from_json(cls, payload: Any) -> SubmissionRecord:
        payload = json_object(payload)
        try:
            shards = ShardRange(require_int(payload, "total_shards"), require_int(payload, "minimum_shard_index"))
        except ConfigError as exc:
            raise RecordError(str(exc)) from None
        if not isinstance(payload.get("job_id"), str) or not isinstance(payload.get("array"), str):
            raise RecordError("a submission needs its 'job_id' and 'array'")
        return cls(payload["job_id"], payload["array"], require_int(payload, "offset"), shards,
                   **read_fields(cls, payload, ("request", "phase", "submitted_at")))

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "array": self.array, "offset": self.offset, **self.shards.to_json(),
                "request": self.request, "phase": self.phase, "submitted_at": self.submitted_at}

"""The records of one attempt: who ran it (``JobIdentity``) and, when it did not complete,
what it left behind (``AttemptRecord``: its failed tasks, or why it ended early)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..atomic import write_json_atomic
from ..layout import ATTEMPT_ERROR_FILE, FAILED_TASKS_FILE, AttemptId, CheckpointLayout, utc_now
from ..sharding import ShardConfig
from .base import (
    SCHEMA_VERSION,
    FieldRecord,
    json_object,
    plain_fields,
    read_fields,
    read_record,
    unknown_fields,
)


@dataclass(frozen=True)
class JobIdentity(FieldRecord):
    """Which job, array task, restart and host wrote a record (``None`` outside SLURM)."""

    slurm_job_id: str | None = None
    slurm_array_job_id: str | None = None
    slurm_array_task_id: int | None = None
    slurm_restart_count: int = 0
    slurm_node_name: str | None = None
    slurm_nodelist: str | None = None
    slurm_num_nodes: int = 1
    hostname: str = ""

    @property
    def node(self) -> str:
        """The name to group work by: SLURM's node name, else the host."""
        return self.slurm_node_name or self.hostname or "?"


@dataclass(frozen=True)
class FailedTaskRecord(FieldRecord):
    """One source task an attempt could not process, and why."""

    task_id: str = "?"
    stage: str = ""
    reason: str = ""

    def describe(self) -> str:
        return f"{self.task_id} in {self.stage or '?'}: {self.reason}"


@dataclass(frozen=True)
class AttemptRecord:
    """What one attempt of one shard left behind when it did not complete.

    Two files share this type: ``failed_tasks.json`` (tasks that failed; rewritten whole as
    more arrive) and ``attempt_error.json`` (the attempt ended early: stopped, a node lost,
    a crash). Only what a living driver can write: SIGKILL leaves no record, which is why
    retry discovery relies on completion manifests alone.
    """

    attempt: str
    shard_index: int | None
    total_shards: int | None = None
    minimum_shard_index: int | None = None
    job: JobIdentity = field(default_factory=JobIdentity)
    failed_tasks: tuple[FailedTaskRecord, ...] = ()
    error_type: str | None = None
    error: str | None = None
    written_at: str | None = None
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    _OWN: ClassVar[set[str]] = {
        "attempt", "shard_index", "total_shards", "minimum_shard_index", "job", "failed_tasks", "error_type",
        "error", "written_at", "schema_version",
    }

    @classmethod
    def of(
        cls, attempt: AttemptId, shard: ShardConfig, job: JobIdentity, *,
        failed_tasks: tuple[FailedTaskRecord, ...] = (), error: BaseException | None = None,
    ) -> AttemptRecord:
        """A record of ``failed_tasks``, or, given ``error``, of why the attempt ended early."""
        return cls(
            attempt=str(attempt), shard_index=shard.shard_index, total_shards=shard.total_shards,
            minimum_shard_index=shard.minimum_shard_index, job=job, failed_tasks=tuple(failed_tasks),
            error_type=type(error).__name__ if error is not None else None,
            error=(str(error) or type(error).__name__) if error is not None else None,
        )

    @property
    def file_name(self) -> str:
        return ATTEMPT_ERROR_FILE if self.error is not None else FAILED_TASKS_FILE

    @classmethod
    def from_json(cls, payload: Any) -> AttemptRecord:
        payload = json_object(payload)
        values = {"shard_index": None, "schema_version": 1,  # a record without a version is of the first
                  **read_fields(cls, payload, only=tuple(cls._OWN - {"attempt"}))}
        return cls(attempt=str(payload.get("attempt", "?")), **values, extra=unknown_fields(payload, cls._OWN))

    def to_json(self) -> dict[str, Any]:
        detail = ("error_type", "error") if self.error is not None else ("failed_tasks",)
        own = plain_fields(self, ("attempt", "shard_index", "total_shards", "minimum_shard_index", "job"))
        return {**self.extra, **own, **plain_fields(self, detail),
                **plain_fields(self, ("written_at", "schema_version"))}

    @classmethod
    def read(cls, path: Path) -> AttemptRecord:
        return read_record(cls.from_json, path)

    def write(self, layout: CheckpointLayout, attempt: AttemptId) -> Path:
        if self.shard_index is None:
            raise ValueError("an attempt record needs its shard index")
        return self.write_at(layout.attempt_dir(attempt, self.shard_index) / self.file_name)

    def write_at(self, path: Path) -> Path:
        """Written atomically at ``path`` (where :meth:`write` would put it, when the layout is not at hand)."""
        return write_json_atomic(path, {**self.to_json(), "written_at": self.written_at or utc_now()})

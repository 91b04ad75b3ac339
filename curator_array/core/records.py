"""The records a checkpoint holds, as types that read and write their own JSON.

Every other module uses their fields; none reads another module's JSON by string keys.
Each record carries a ``schema_version``. A record without one was written by an earlier
curator-array (version 1) and still reads: fields it lacks take their defaults. A
completion manifest of the reference system holds only its four spec fields
(``minimum_shard_index``, ``shard_index``, ``status``, ``total_shards``) and counts as
complete all the same. Fields this version does not know are kept in ``extra``.

A field a reader depends on (the spec fields) is checked strictly and a bad one is an
error; the measured fields (counts, times, hosts) are informational, so a wrong type
there falls back to the default instead of making a finished shard unreadable.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from .. import __version__
from .atomic import create_bytes_exclusive, dump_json, write_json_atomic
from .errors import ConfigError, CorruptCheckpointError
from .layout import ATTEMPT_ERROR_FILE, FAILED_TASKS_FILE, AttemptId, CheckpointLayout, utc_now
from .sharding import ShardConfig, ShardRange

SCHEMA_VERSION = 2
WRITTEN_BY = f"curator-array {__version__}"
MALFORMED_LINES = "malformed_lines"


class RecordError(ValueError):
    """A record's JSON is not what it claims to be; the message says which field and why."""


def load_json(path: Path) -> Any:
    """A JSON file, or CorruptCheckpointError naming it."""
    try:
        return json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise CorruptCheckpointError(f"{path}: not valid JSON ({exc})") from None


def read_record(from_json: Callable[[Any], Any], path: Path) -> Any:
    """The record in ``path`` as ``from_json`` builds it; CorruptCheckpointError naming the file."""
    try:
        return from_json(load_json(path))
    except RecordError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def require_int(payload: Mapping[str, Any], key: str) -> int:
    value = payload.get(key)
    if not _is_int(value):
        raise RecordError(f"field {key!r} must be an integer, got {value!r}")
    return value


def _int(payload: Mapping[str, Any], key: str, default: int | None = 0) -> int | None:
    value = payload.get(key)
    return value if _is_int(value) else default


def _number(payload: Mapping[str, Any], key: str) -> float | None:
    value = payload.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(payload: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) else default


def _texts(payload: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = payload.get(key)
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _counts(payload: Mapping[str, Any], key: str) -> dict[str, int]:
    value = payload.get(key)
    return {k: v for k, v in value.items() if _is_int(v)} if isinstance(value, dict) else {}


def _object(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(payload, Mapping):
        raise RecordError(f"expected a JSON object, got {type(payload).__name__}")
    return payload


def _extra(payload: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in known}


@dataclass(frozen=True)
class JobIdentity:
    """Which job, array task, restart and host wrote a record (``None`` outside SLURM)."""

    slurm_job_id: str | None = None
    slurm_array_job_id: str | None = None
    slurm_array_task_id: int | None = None
    slurm_restart_count: int = 0
    slurm_node_name: str | None = None
    slurm_nodelist: str | None = None
    slurm_num_nodes: int = 1
    hostname: str = ""

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> JobIdentity:
        payload = payload if isinstance(payload, Mapping) else {}
        return cls(
            slurm_job_id=_text(payload, "slurm_job_id"),
            slurm_array_job_id=_text(payload, "slurm_array_job_id"),
            slurm_array_task_id=_int(payload, "slurm_array_task_id", None),
            slurm_restart_count=_int(payload, "slurm_restart_count") or 0,
            slurm_node_name=_text(payload, "slurm_node_name"),
            slurm_nodelist=_text(payload, "slurm_nodelist"),
            slurm_num_nodes=_int(payload, "slurm_num_nodes") or 1,
            hostname=_text(payload, "hostname", "") or "",
        )

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def node(self) -> str:
        """The name to group work by: SLURM's node name, else the host."""
        return self.slurm_node_name or self.hostname or "?"


@dataclass(frozen=True)
class ShardWork:
    """What one shard's run did: tasks, rows, bytes, drops and the files it wrote."""

    source_tasks: int = 0
    source_task_ids: tuple[str, ...] = ()
    tasks_written: int = 0
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    rows_dropped_by_stage: dict[str, int] = field(default_factory=dict)
    records_skipped: dict[str, int] = field(default_factory=dict)
    tokens: int = 0  # of the documents written, when the run counts them (--tokenize)
    output_dir: str | None = None
    output_files: tuple[str, ...] = ()
    output_file_count: int = 0

    @classmethod
    def with_files(cls, output_files: tuple[str, ...], **fields: Any) -> ShardWork:
        return cls(output_files=output_files, output_file_count=len(output_files), **fields)

    @property
    def malformed_records_skipped(self) -> int:
        return self.records_skipped.get(MALFORMED_LINES, 0)

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> ShardWork:
        return cls(
            source_tasks=_int(payload, "source_tasks") or 0,
            source_task_ids=_texts(payload, "source_task_ids"),
            tasks_written=_int(payload, "tasks_written") or 0,
            rows_in=_int(payload, "rows_in") or 0,
            rows_out=_int(payload, "rows_out") or 0,
            bytes_in=_int(payload, "bytes_in") or 0,
            rows_dropped_by_stage=_counts(payload, "rows_dropped_by_stage"),
            records_skipped=_counts(payload, "records_skipped"),
            tokens=_int(payload, "tokens") or 0,
            output_dir=_text(payload, "output_dir"),
            output_files=_texts(payload, "output_files"),
            output_file_count=_int(payload, "output_file_count", None) or len(_texts(payload, "output_files")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "source_tasks": self.source_tasks,
            "source_task_ids": list(self.source_task_ids),
            "tasks_written": self.tasks_written,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "bytes_in": self.bytes_in,
            "rows_dropped_by_stage": dict(self.rows_dropped_by_stage),
            "records_skipped": dict(self.records_skipped),
            "malformed_records_skipped": self.malformed_records_skipped,
            **({"tokens": self.tokens} if self.tokens else {}),  # only a run that counts tokens has them
            "output_dir": self.output_dir,
            "output_files": list(self.output_files),
            "output_file_count": self.output_file_count,
        }


@dataclass
class WorkTotals:
    """What the complete shards of a run did together."""

    source_tasks: int = 0
    rows_in: int = 0
    rows_out: int = 0
    output_file_count: int = 0
    tokens: int = 0

    def add(self, work: ShardWork) -> None:
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(work, item.name))

    def merge(self, other: WorkTotals) -> None:
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def to_json(self) -> dict[str, int]:
        return {item.name: value for item in fields(self)
                if (value := getattr(self, item.name)) or item.name != "tokens"}


@dataclass(frozen=True)
class AttemptShare:
    """What one attempt of a resumed shard contributed to it."""

    attempt: str
    tasks: int = 0
    rows_in: int = 0
    rows_out: int = 0

    @classmethod
    def from_json(cls, payload: Any) -> AttemptShare:
        payload = payload if isinstance(payload, Mapping) else {}
        return cls(str(payload.get("attempt", "?")), _int(payload, "tasks") or 0, _int(payload, "rows_in") or 0,
                   _int(payload, "rows_out") or 0)

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "tasks": self.tasks, "rows_in": self.rows_in, "rows_out": self.rows_out}


@dataclass(frozen=True)
class StageTime:
    """Where one stage's time went on one node: what tells a user which stage bounds a shard.

    ``wall_s`` and ``cpu_s`` are the stage's own (the stages before it in the same process
    are not counted); ``queued_s`` sums, over the batches it took from a stage in another
    process, how long each waited between being handed on and being started (for a CPU,
    the object store, a slot under a cap). ``rows`` are the rows it emitted, ``outputs`` the
    tasks.
    """

    stage: str
    node: str = ""
    outputs: int = 0
    rows: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    queued_s: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return self.stage, self.node

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.wall_s if self.wall_s > 0 else None

    def __add__(self, other: StageTime) -> StageTime:
        return StageTime(self.stage, self.node if self.node == other.node else "", self.outputs + other.outputs,
                         self.rows + other.rows, self.wall_s + other.wall_s, self.cpu_s + other.cpu_s,
                         self.queued_s + other.queued_s)

    @classmethod
    def from_json(cls, payload: Any) -> StageTime:
        payload = payload if isinstance(payload, Mapping) else {}
        return cls(str(payload.get("stage", "?")), _text(payload, "node", "") or "", _int(payload, "outputs") or 0,
                   _int(payload, "rows") or 0, _number(payload, "wall_s") or 0.0, _number(payload, "cpu_s") or 0.0,
                   _number(payload, "queued_s") or 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "node": self.node, "outputs": self.outputs, "rows": self.rows,
                "wall_s": round(self.wall_s, 3), "cpu_s": round(self.cpu_s, 3), "queued_s": round(self.queued_s, 3)}


def add_stage_times(totals: dict[tuple[str, str], StageTime], times: Iterable[StageTime]) -> None:
    """Sum ``times`` into ``totals`` by (stage, node), keeping the order stages first appear in."""
    for time in times:
        known = totals.get(time.key)
        totals[time.key] = time if known is None else known + time


def per_stage(times: Iterable[StageTime]) -> list[StageTime]:
    """``times`` summed over nodes, one per stage, in the order stages first appear."""
    totals: dict[tuple[str, str], StageTime] = {}
    add_stage_times(totals, (replace(time, node="") for time in times))
    return list(totals.values())


_WORK_KEYS = {*(f.name for f in fields(ShardWork)), "malformed_records_skipped"}
_JOB_KEYS = {f.name for f in fields(JobIdentity)}


@dataclass(frozen=True)
class CompletionManifest:
    """``completed_slurm_array_<S>.json``: the shard is complete, and what its run did.

    Written once, atomically, only when every task of the shard succeeded. In the file the
    work and job fields sit at the top level beside the spec's four fields.
    """

    shard_index: int
    total_shards: int
    minimum_shard_index: int = 0
    status: str = "completed"
    schema_version: int = SCHEMA_VERSION
    written_by: str | None = WRITTEN_BY
    run_id: str | None = None
    work: ShardWork = field(default_factory=ShardWork)
    source_task_count_in_run: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    attempt: str | None = None
    job: JobIdentity = field(default_factory=JobIdentity)
    hostnames: tuple[str, ...] = ()
    ray_nodes: tuple[dict[str, Any], ...] = ()
    timeline_s: dict[str, float] = field(default_factory=dict)
    attempts: tuple[AttemptShare, ...] = ()  # each attempt's share; one entry unless the shard resumed
    stages: tuple[StageTime, ...] = ()  # where the completing attempt's time went, per stage and node
    extra: dict[str, Any] = field(default_factory=dict)

    _OWN: ClassVar[tuple[str, ...]] = (
        "shard_index", "total_shards", "minimum_shard_index", "status", "schema_version", "written_by", "run_id",
        "source_task_count_in_run", "started_at", "ended_at", "duration_s", "attempt", "hostnames", "ray_nodes",
        "timeline_s", "attempts", "resumed_tasks", "stages",
    )

    @property
    def resumed_tasks(self) -> int:
        """Tasks finished by earlier attempts and not run again by the one that completed the shard."""
        return sum(share.tasks for share in self.attempts if share.attempt != self.attempt)

    @classmethod
    def of(cls, shard: ShardConfig, **fields: Any) -> CompletionManifest:
        return cls(shard.shard_index, shard.total_shards, shard.minimum_shard_index, **fields)

    @classmethod
    def from_json(cls, payload: Any) -> CompletionManifest:
        """Raises RecordError when a spec field is missing or wrong."""
        payload = _object(payload)
        if payload.get("status") != "completed":
            raise RecordError(f"status is {payload.get('status')!r}, not 'completed'")
        nodes = payload.get("ray_nodes")
        timeline = payload.get("timeline_s")
        return cls(
            shard_index=require_int(payload, "shard_index"),
            total_shards=require_int(payload, "total_shards"),
            minimum_shard_index=require_int(payload, "minimum_shard_index"),
            schema_version=_int(payload, "schema_version", 1) or 1,
            written_by=_text(payload, "written_by"),
            run_id=_text(payload, "run_id"),
            work=ShardWork.from_json(payload),
            source_task_count_in_run=_int(payload, "source_task_count_in_run", None),
            started_at=_text(payload, "started_at"),
            ended_at=_text(payload, "ended_at"),
            duration_s=_number(payload, "duration_s"),
            attempt=_text(payload, "attempt"),
            job=JobIdentity.from_json(payload),
            hostnames=_texts(payload, "hostnames"),
            ray_nodes=tuple(n for n in nodes if isinstance(n, dict)) if isinstance(nodes, list) else (),
            timeline_s={k: float(v) for k, v in timeline.items() if isinstance(v, (int, float))}
            if isinstance(timeline, dict) else {},
            attempts=tuple(AttemptShare.from_json(a) for a in payload.get("attempts") or [] if isinstance(a, dict)),
            stages=tuple(StageTime.from_json(t) for t in payload.get("stages") or [] if isinstance(t, dict)),
            extra=_extra(payload, {*cls._OWN, *_WORK_KEYS, *_JOB_KEYS}),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            **self.work.to_json(),
            **self.job.to_json(),
            "shard_index": self.shard_index,
            "total_shards": self.total_shards,
            "minimum_shard_index": self.minimum_shard_index,
            "status": self.status,
            "schema_version": self.schema_version,
            "written_by": self.written_by,
            "run_id": self.run_id,
            "source_task_count_in_run": self.source_task_count_in_run,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": self.duration_s,
            "attempt": self.attempt,
            "hostnames": list(self.hostnames),
            "ray_nodes": list(self.ray_nodes),
            "timeline_s": dict(self.timeline_s),
            **({"stages": [t.to_json() for t in self.stages]} if self.stages else {}),
            **({"attempts": [a.to_json() for a in self.attempts], "resumed_tasks": self.resumed_tasks}
               if self.attempts else {}),
        }

    @classmethod
    def read(cls, path: Path) -> CompletionManifest:
        return read_record(cls.from_json, path)

    def write(self, layout: CheckpointLayout) -> Path:
        return write_json_atomic(layout.manifest_path(self.shard_index), self.to_json())


@dataclass(frozen=True)
class FailedTaskRecord:
    """One source task an attempt could not process, and why."""

    task_id: str
    stage: str = ""
    reason: str = ""

    @classmethod
    def from_json(cls, payload: Any) -> FailedTaskRecord:
        payload = payload if isinstance(payload, Mapping) else {}
        return cls(str(payload.get("task_id", "?")), _text(payload, "stage", "") or "", _text(payload, "reason", "") or "")

    def to_json(self) -> dict[str, str]:
        return {"task_id": self.task_id, "stage": self.stage, "reason": self.reason}

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
        payload = _object(payload)
        failed = payload.get("failed_tasks")
        return cls(
            attempt=str(payload.get("attempt", "?")),
            shard_index=_int(payload, "shard_index", None),
            total_shards=_int(payload, "total_shards", None),
            minimum_shard_index=_int(payload, "minimum_shard_index", None),
            job=JobIdentity.from_json(payload.get("job") or {}),
            failed_tasks=tuple(FailedTaskRecord.from_json(f) for f in failed) if isinstance(failed, list) else (),
            error_type=_text(payload, "error_type"),
            error=_text(payload, "error"),
            written_at=_text(payload, "written_at"),
            schema_version=_int(payload, "schema_version", 1) or 1,
            extra=_extra(payload, cls._OWN),
        )

    def to_json(self) -> dict[str, Any]:
        detail: dict[str, Any] = (
            {"error_type": self.error_type, "error": self.error} if self.error is not None
            else {"failed_tasks": [f.to_json() for f in self.failed_tasks]}
        )
        return {
            **self.extra,
            "attempt": self.attempt,
            "shard_index": self.shard_index,
            "total_shards": self.total_shards,
            "minimum_shard_index": self.minimum_shard_index,
            "job": self.job.to_json(),
            **detail,
            "written_at": self.written_at,
            "schema_version": self.schema_version,
        }

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


@dataclass(frozen=True)
class ListingRef:
    """How run.json names the run's frozen listing: its file, digest and size."""

    file: str
    digest: str
    files: int = 0
    bytes: int = 0

    @classmethod
    def from_json(cls, payload: Any) -> ListingRef:
        payload = _object(payload)
        file, digest = payload.get("file"), payload.get("digest")
        if not isinstance(file, str) or not isinstance(digest, str):
            raise RecordError(f"a listing reference needs 'file' and 'digest' strings, got {dict(payload)!r}")
        return cls(file, digest, _int(payload, "files") or 0, _int(payload, "bytes") or 0)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "digest": self.digest, "files": self.files, "bytes": self.bytes}


@dataclass(frozen=True)
class Setting:
    """A run option's value and where it came from (a flag, a site's ``[env]``, the
    environment, the default, a pinned request)."""

    value: Any
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"value": list(self.value) if isinstance(self.value, tuple) else self.value, "source": self.source}

    @classmethod
    def from_json(cls, payload: Any) -> Setting:
        if not isinstance(payload, Mapping) or "value" not in payload or not isinstance(payload.get("source"), str):
            raise RecordError(f"a setting needs a value and a source, got {payload!r}")
        value = payload["value"]
        return cls(tuple(value) if isinstance(value, list) else value, payload["source"])

    @property
    def shown(self) -> str:
        """The value as a user writes it in a variable: lists joined by commas, flags 1 or 0."""
        value = self.value
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, (tuple, list)):
            return ",".join(map(str, value))
        return "" if value is None else str(value)


@dataclass(frozen=True)
class PinnedRequest:
    """``request-<id>.json``: the run options a start was given, with where each came from.

    ``submit`` writes one before it queues anything, and its elements run exactly it
    (``run --request ID``), whatever reaches them through a container runtime; the first
    start of a run pins its own in ``run.json``. The id is a digest of the settings, so
    the same request is one file.
    """

    settings: dict[str, Setting]
    written_at: str | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def id(self) -> str:
        payload = {name: setting.to_json() for name, setting in self.settings.items()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_json(cls, payload: Any) -> PinnedRequest:
        payload = _object(payload)
        settings = payload.get("settings")
        if not isinstance(settings, dict):
            raise RecordError("'settings' must map each option to its value and source")
        return cls({name: Setting.from_json(value) for name, value in settings.items()}, _text(payload, "written_at"),
                   _int(payload, "schema_version", 1) or 1)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "settings": {name: setting.to_json() for name, setting in self.settings.items()},
                "written_at": self.written_at, "schema_version": self.schema_version}

    @classmethod
    def read(cls, layout: CheckpointLayout, request_id: str) -> PinnedRequest:
        path = layout.request_path(request_id)
        if not path.is_file():
            raise CorruptCheckpointError(f"{path}: no such request in the checkpoint (was it archived by --new-run?)")
        request = read_record(cls.from_json, path)
        if request.id != request_id:
            raise CorruptCheckpointError(f"{path}: its settings do not match its id {request_id}")
        return request

    def write(self, layout: CheckpointLayout) -> str:
        """Write once (a request with the same settings is the same file); returns the id."""
        layout.completion_dir.mkdir(parents=True, exist_ok=True)
        create_bytes_exclusive(layout.request_path(self.id), dump_json({**self.to_json(), "written_at": utc_now()}))
        return self.id


@dataclass(frozen=True)
class SubmissionRecord:
    """One line of ``submissions.jsonl``: an ``sbatch --array`` window that submit or retry queued.

    ``phase`` None is the root phase (the spec's shards), as lines written before phases
    were recorded say nothing.
    """

    job_id: str
    array: str
    offset: int
    shards: ShardRange
    request: str | None = None
    phase: str | None = None
    submitted_at: float | None = None

    @classmethod
    def from_json(cls, payload: Any) -> SubmissionRecord:
        payload = _object(payload)
        try:
            shards = ShardRange(require_int(payload, "total_shards"), require_int(payload, "minimum_shard_index"))
        except ConfigError as exc:
            raise RecordError(str(exc)) from None
        job_id, array = payload.get("job_id"), payload.get("array")
        if not isinstance(job_id, str) or not isinstance(array, str):
            raise RecordError("a submission needs its 'job_id' and 'array'")
        return cls(job_id, array, require_int(payload, "offset"), shards, _text(payload, "request"),
                   _text(payload, "phase"), _number(payload, "submitted_at"))

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "array": self.array, "offset": self.offset, **self.shards.to_json(),
                "request": self.request, "phase": self.phase, "submitted_at": self.submitted_at}

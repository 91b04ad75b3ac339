"""The records of one logical shard of the first phase: its completion manifest (the
spec's ``completed_slurm_array_<S>.json``) and what it holds, the shard's work, each
attempt's share of it and the time each stage took."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from ..atomic import write_json_atomic
from ..curation_counts import CurationCounts
from ..layout import CheckpointLayout
from ..sharding import ShardConfig
from ..tallies import TALLIES, Tallies
from .attempt import JobIdentity
from .base import (
    SCHEMA_VERSION,
    WRITTEN_BY,
    FieldRecord,
    RecordError,
    json_object,
    plain,
    plain_fields,
    read_fields,
    read_record,
    require_int,
    unknown_fields,
)

MALFORMED_LINES = "malformed_lines"


@dataclass(frozen=True)
class ShardWork:
    """What one shard's run did: its figures (``CurationCounts``, which the manifest's
    ``work`` holds under their own keys, the spec's ``rows_in`` and ``rows_out`` among them,
    written and read by the ``Counts`` codec) and the tasks and files behind them."""

    counts: CurationCounts = field(default_factory=CurationCounts)
    source_task_ids: tuple[str, ...] = ()
    # Each task's input files (relative to the input root): an output named by its task (fg-<hash>)
    # is traced to what it was made from.
    task_inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tasks_written: int = 0
    output_dir: str | None = None
    output_files: tuple[str, ...] = ()

    @classmethod
    def of(cls, output_files: tuple[str, ...] = (), *, source_task_ids: tuple[str, ...] = (),
           task_inputs: Mapping[str, tuple[str, ...]] | None = None, tasks_written: int = 0,
           output_dir: str | None = None, tallies: Tallies | None = None, **figures: Any) -> ShardWork:
        """``figures``: ``CurationCounts``' fields by name; ``output_file_count`` is the files'
        count unless given; ``tallies`` adds the stages' tallies."""
        figures.setdefault("output_file_count", len(output_files))
        counts = CurationCounts(**figures, **(tallies.to_json() if tallies is not None else {}))
        return cls(counts, tuple(source_task_ids), dict(task_inputs or {}), tasks_written, output_dir,
                   tuple(output_files))

    def __getattr__(self, name: str) -> Any:
        """A figure by the name the manifest gives it (``work.rows_in``)."""
        if name in _FIGURES:
            return getattr(self.counts, name)
        raise AttributeError(f"{type(self).__name__} has no {name!r}")

    @property
    def malformed_records_skipped(self) -> int:
        return self.counts.records_skipped.get(MALFORMED_LINES, 0)

    @property
    def tallies(self) -> Tallies:
        return Tallies.of_counts(self.counts)

    @classmethod
    def from_json(cls, payload: Any) -> ShardWork:
        payload = payload if isinstance(payload, Mapping) else {}
        values = read_fields(cls, payload, only=_BESIDE_THE_COUNTS)
        counts = CurationCounts.from_json(payload)
        if not counts.output_file_count:  # written before the count was
            counts = replace(counts, output_file_count=len(values.get("output_files", ())))
        return cls(counts, **values)

    def to_json(self) -> dict[str, Any]:
        figures = {name: value for name, value in self.counts.to_json().items()
                   if value or name not in _ONLY_WHEN_COUNTED}
        written = plain_fields(self, only=_BESIDE_THE_COUNTS)
        if not written["task_inputs"]:
            del written["task_inputs"]
        return {**written, **figures, "malformed_records_skipped": self.malformed_records_skipped}


_FIGURES = frozenset(item.name for item in fields(CurationCounts))
_BESIDE_THE_COUNTS = ("source_task_ids", "task_inputs", "tasks_written", "output_dir", "output_files")
# Figures a manifest holds only when the run has them (tokens with --tokenize, ...).
_ONLY_WHEN_COUNTED = ("tokens", "tasks_without_output", "contamination", *TALLIES)


@dataclass(frozen=True)
class AttemptShare(FieldRecord):
    """What one attempt of a resumed shard contributed to it."""

    attempt: str = "?"
    tasks: int = 0
    rows_in: int = 0
    rows_out: int = 0


@dataclass(frozen=True)
class StageTime:
    """Where one stage's time went on one node: what tells a user which stage bounds a shard.

    ``wall_s`` and ``cpu_s`` are the stage's own (the stages before it in the same process
    are not counted); ``queued_s`` sums, over the batches it took from a stage in another
    process, how long each waited between being handed on and being started (for a CPU,
    the object store, a slot under a cap). ``rows`` are the rows it received (a reader's: the
    rows it emitted), ``outputs`` the tasks.
    """

    stage: str = "?"
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
        return cls(**read_fields(cls, payload if isinstance(payload, dict) else {}))

    def to_json(self) -> dict[str, Any]:
        return {name: round(value, 3) if isinstance(value, float) else value
                for name, value in plain_fields(self).items()}


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


_WORK_KEYS = {*_BESIDE_THE_COUNTS, *_FIGURES, "malformed_records_skipped"}
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

    # Read by their types from the top level of the file (the spec's fields are read strictly).
    _MEASURED: ClassVar[tuple[str, ...]] = (
        "written_by", "run_id", "source_task_count_in_run", "started_at", "ended_at", "duration_s", "attempt",
        "hostnames", "ray_nodes", "timeline_s", "attempts", "stages",
    )
    _OWN: ClassVar[tuple[str, ...]] = (
        "shard_index", "total_shards", "minimum_shard_index", "status", "schema_version", *_MEASURED,
        "resumed_tasks",
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
        payload = json_object(payload)
        if payload.get("status") != "completed":
            raise RecordError(f"status is {payload.get('status')!r}, not 'completed'")
        return cls(
            shard_index=require_int(payload, "shard_index"),
            total_shards=require_int(payload, "total_shards"),
            minimum_shard_index=require_int(payload, "minimum_shard_index"),
            **{"schema_version": 1, "written_by": None,  # a manifest without them is of the first version
               **read_fields(cls, payload, ("schema_version", *cls._MEASURED))},
            work=ShardWork.from_json(payload),
            job=JobIdentity.from_json(payload),
            extra=unknown_fields(payload, {*cls._OWN, *_WORK_KEYS, *_JOB_KEYS}),
        )

    def to_json(self) -> dict[str, Any]:
        written = {**self.extra, **self.work.to_json(), **self.job.to_json(),
                   **plain_fields(self, ("shard_index", "total_shards", "minimum_shard_index", "status",
                                         "schema_version", "written_by", "run_id", "source_task_count_in_run",
                                         "started_at", "ended_at", "duration_s", "attempt", "hostnames",
                                         "ray_nodes", "timeline_s"))}
        if self.stages:
            written["stages"] = plain(self.stages)
        if self.attempts:
            written.update(attempts=plain(self.attempts), resumed_tasks=self.resumed_tasks)
        return written

    @classmethod
    def read(cls, path: Path) -> CompletionManifest:
        return read_record(cls.from_json, path)

    def write(self, layout: CheckpointLayout) -> Path:
        return write_json_atomic(layout.manifest_path(self.shard_index), self.to_json())


def shard_output_files(layout: CheckpointLayout, shard: int) -> tuple[str, ...]:
    """The files shard ``shard`` of the first phase wrote, relative to where it wrote them,
    as its completion manifest lists them."""
    return CompletionManifest.read(layout.manifest_path(shard)).work.output_files

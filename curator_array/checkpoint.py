"""The checkpoint directory: run configuration, completion manifests, failed-task records.

Layout (the reference system's, so each tool can read the other's runs)::

    CHECKPOINT/.nemo_curator_metadata/
      .slurm_array_completion/run.json                   written once, validated on every start
      .slurm_array_completion/completed_slurm_array_<S>.json   one per successful shard
      .slurm_array_completion/source_tasks-<digest>.json       full source-id list (ours)
      .failed_tasks/<attempt>/shard_<S>/failed_tasks.json      FailedTask results of one attempt
      .failed_tasks/<attempt>/shard_<S>/attempt_error.json     why an attempt stopped early (ours)

``<attempt>`` is ``slurm_job_<J>/array_task_<A>/restart_<R>`` under SLURM and
``local_attempt_<id>`` outside it, so an old failure can never mark a later attempt failed.
What run.json holds and how a start is checked against it is ``run_config``'s.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .atomic import dump_json, write_bytes_atomic
from .errors import CorruptCheckpointError
from .jobenv import JobEnvironment
from .sharding import ShardConfig

if TYPE_CHECKING:
    from .run_config import RunConfig

METADATA_DIR = ".nemo_curator_metadata"
COMPLETION_DIR = ".slurm_array_completion"
FAILED_TASKS_DIR = ".failed_tasks"
RUN_FILE = "run.json"
MANIFEST_PREFIX = "completed_slurm_array_"
FAILED_TASKS_FILE = "failed_tasks.json"
ATTEMPT_ERROR_FILE = "attempt_error.json"
SUBMISSIONS_FILE = "submissions.jsonl"
ARCHIVE_DIR = ".archived_runs"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class CheckpointLayout:
    """Paths inside one checkpoint directory; creating nothing until asked."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def metadata_dir(self) -> Path:
        return self.root / METADATA_DIR

    @property
    def completion_dir(self) -> Path:
        return self.metadata_dir / COMPLETION_DIR

    @property
    def run_file(self) -> Path:
        return self.completion_dir / RUN_FILE

    @property
    def failed_tasks_root(self) -> Path:
        return self.metadata_dir / FAILED_TASKS_DIR

    def pin_file(self, field: str) -> Path:
        """Where a field missing from an older run.json is pinned first (see ``_pin``)."""
        return self.completion_dir / f"pin-{field}.json"

    @property
    def submissions_file(self) -> Path:
        return self.metadata_dir / SUBMISSIONS_FILE

    @property
    def archive_root(self) -> Path:
        return self.metadata_dir / ARCHIVE_DIR

    def manifest_path(self, shard_index: int) -> Path:
        return self.completion_dir / f"{MANIFEST_PREFIX}{shard_index}.json"

    def source_list_path(self, digest: str) -> Path:
        return self.completion_dir / f"source_tasks-{digest[:16]}.json"

    def attempt_dir(self, attempt: AttemptId, shard_index: int) -> Path:
        return self.failed_tasks_root.joinpath(*attempt.parts, f"shard_{shard_index}")


@dataclass(frozen=True)
class AttemptId:
    """One try at one shard; each gets its own failed-task directory."""

    parts: tuple[str, ...]

    @classmethod
    def from_job(cls, job: JobEnvironment, local_id: str | None = None) -> AttemptId:
        if job.in_slurm:
            array_task = "none" if job.array_task_id is None else str(job.array_task_id)
            return cls(
                (
                    f"slurm_job_{job.job_id}",
                    f"array_task_{array_task}",
                    f"restart_{job.restart_count}",
                )
            )
        if local_id is None:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            local_id = f"{stamp}-{job.hostname or 'host'}-{os.getpid()}"
        return cls((f"local_attempt_{local_id}",))

    def __str__(self) -> str:
        return "/".join(self.parts)


def completion_manifest(shard: ShardConfig, **fields: Any) -> dict[str, Any]:
    """The reference fields plus whatever the caller measured."""
    return {
        **fields,
        "minimum_shard_index": shard.minimum_shard_index,
        "shard_index": shard.shard_index,
        "status": "completed",
        "total_shards": shard.total_shards,
        "written_by": f"curator-array {__version__}",
    }


def write_completion_manifest(layout: CheckpointLayout, manifest: dict[str, Any]) -> Path:
    path = layout.manifest_path(manifest["shard_index"])
    layout.completion_dir.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, dump_json(manifest))
    return path


def manifest_exists(layout: CheckpointLayout, shard_index: int) -> bool:
    return layout.manifest_path(shard_index).is_file()


SUMMED_MANIFEST_FIELDS = ("source_tasks", "rows_in", "rows_out", "output_file_count")
PARALLEL_READ_THRESHOLD = 4096


@dataclass
class ManifestScan:
    """What all completion manifests of a run say, reduced to what retry and status need."""

    shards: set[int] = field(default_factory=set)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMMED_MANIFEST_FIELDS, 0))
    durations: list[float] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    records: dict[int, dict[str, Any]] = field(default_factory=dict)  # shard → the fields asked for

    def merge(self, other: ManifestScan) -> None:
        self.shards |= other.shards
        self.records.update(other.records)
        for name, value in other.totals.items():
            self.totals[name] += value
        self.durations += other.durations
        self.errors += other.errors


def _manifest_problem(payload: Any, run: RunConfig) -> str | None:
    if not isinstance(payload, dict):
        return "expected a JSON object"
    if payload.get("status") != "completed":
        return f"status is {payload.get('status')!r}, not 'completed'"
    for key in ("total_shards", "minimum_shard_index", "shard_index"):
        value = payload.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"field {key!r} must be an integer, got {value!r}"
    if (payload["total_shards"], payload["minimum_shard_index"]) != (run.total_shards, run.minimum_shard_index):
        return (
            f"written for total_shards={payload['total_shards']}, "
            f"minimum_shard_index={payload['minimum_shard_index']} but run.json has "
            f"total_shards={run.total_shards}, minimum_shard_index={run.minimum_shard_index}: it belongs to another run"
        )
    if payload["shard_index"] not in run.shards:
        return f"shard_index {payload['shard_index']} is outside the run's range {run.shards}"
    written_for = payload.get("run_id")
    if run.run_id and written_for and written_for != run.run_id:
        return f"written for run {written_for} but run.json is run {run.run_id}: it belongs to an archived run"
    return None


def _scan_manifest_files(directory: str, names: list[str], run: RunConfig, keep: tuple[str, ...] = ()) -> ManifestScan:
    """Read and check a list of manifests; runs in a worker process for large runs."""
    scan = ManifestScan()
    for name in names:
        try:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
            finally:
                os.close(fd)
            payload = json.loads(b"".join(chunks))
        except ValueError as exc:
            scan.errors.append((name, f"not valid JSON ({exc})"))
            continue
        except OSError as exc:
            scan.errors.append((name, f"unreadable ({exc.strerror})"))
            continue
        problem = _manifest_problem(payload, run)
        if problem:
            scan.errors.append((name, problem))
            continue
        scan.shards.add(payload["shard_index"])
        if keep:
            scan.records[payload["shard_index"]] = {key: payload.get(key) for key in keep}
        for key in SUMMED_MANIFEST_FIELDS:
            value = payload.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                scan.totals[key] += value
        if isinstance(payload.get("duration_s"), (int, float)):
            scan.durations.append(float(payload["duration_s"]))
    return scan


def scan_completion_manifests(layout: CheckpointLayout, run: RunConfig, keep: tuple[str, ...] = ()) -> ManifestScan:
    """Every completion manifest, checked against run.json; the first bad one is an error.
    ``keep`` names fields to return per shard (``records``).

    Large runs are read on several cores: at 100,000 shards one core spends seconds
    opening small files.
    """
    directory = layout.completion_dir
    with os.scandir(directory) as entries:
        names = [e.name for e in entries if e.name.startswith(MANIFEST_PREFIX) and e.name.endswith(".json")]
    workers = min(4, os.cpu_count() or 1)
    if len(names) < PARALLEL_READ_THRESHOLD or workers < 2 or not hasattr(os, "fork"):
        scan = _scan_manifest_files(str(directory), names, run, keep)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        parts = [names[i::workers] for i in range(workers)]
        scan = ManifestScan()
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for part in pool.map(_scan_manifest_files, [str(directory)] * workers, parts, [run] * workers,
                                 [keep] * workers):
                scan.merge(part)
    if scan.errors:
        name, problem = min(scan.errors)
        raise CorruptCheckpointError(f"{directory / name}: {problem}")
    return scan


def write_failed_tasks(
    layout: CheckpointLayout,
    attempt: AttemptId,
    shard: ShardConfig,
    failures: Sequence[dict[str, Any]],
    job: JobEnvironment,
) -> Path:
    """Record this attempt's FailedTask results (rewritten whole as more arrive)."""
    return _write_attempt_record(layout, attempt, shard, job, FAILED_TASKS_FILE, {"failed_tasks": list(failures)})


def write_attempt_error(
    layout: CheckpointLayout, attempt: AttemptId, shard: ShardConfig, job: JobEnvironment, error: BaseException
) -> Path:
    """Record why an attempt ended without a manifest (stopped, node lost, crashed).

    Only what the driver can still write: a SIGKILL or a lost head node leaves no record,
    which is why retry discovery never relies on these files.
    """
    detail = {"error_type": type(error).__name__, "error": str(error) or type(error).__name__}
    return _write_attempt_record(layout, attempt, shard, job, ATTEMPT_ERROR_FILE, detail)


def _write_attempt_record(
    layout: CheckpointLayout, attempt: AttemptId, shard: ShardConfig, job: JobEnvironment, name: str,
    detail: dict[str, Any],
) -> Path:
    directory = layout.attempt_dir(attempt, shard.shard_index)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    payload = {
        "attempt": str(attempt),
        "shard_index": shard.shard_index,
        "total_shards": shard.total_shards,
        "minimum_shard_index": shard.minimum_shard_index,
        "job": job.describe(),
        **detail,
        "written_at": utc_now(),
    }
    write_bytes_atomic(path, dump_json(payload))
    return path


def find_failed_attempt_records(layout: CheckpointLayout) -> list[tuple[Path, dict[str, Any]]]:
    """Every failed_tasks.json and attempt_error.json of every attempt (unreadable ones reported, not fatal)."""
    root = layout.failed_tasks_root
    if not root.is_dir():
        return []
    paths = sorted(p for p in root.rglob("*.json") if p.name in (FAILED_TASKS_FILE, ATTEMPT_ERROR_FILE))
    records = []
    for path in paths:
        try:
            payload = json.loads(path.read_bytes())
        except (OSError, json.JSONDecodeError) as exc:
            payload = {"unreadable": str(exc)}
        records.append((path, payload))
    return records

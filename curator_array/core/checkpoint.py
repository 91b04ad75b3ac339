"""Reading a run's records back: every completion manifest, every attempt record.

The records themselves (what a manifest or an attempt record holds) are ``records``';
where they live is ``layout``'s. This module answers "which shards are complete, and what
did they do" for ``retry``, ``status`` and the report, checking each manifest against the
run contract, so a foreign or stale manifest is an error instead of a silent "complete".
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .curation_counts import CurationCounts
from .errors import CorruptCheckpointError
from .layout import ATTEMPT_ERROR_FILE, FAILED_TASKS_FILE, MANIFEST_PREFIX, CheckpointLayout
from .records.attempt import AttemptRecord
from .records.base import RecordError
from .records.shard import CompletionManifest, StageTime, add_stage_times
from .run_contract import RunConfig

PARALLEL_READ_THRESHOLD = 4096


@dataclass
class ManifestScan:
    """What all completion manifests of a run say, reduced to what retry and status need."""

    shards: set[int] = field(default_factory=set)
    counts: CurationCounts = field(default_factory=CurationCounts)
    durations: list[float] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    manifests: dict[int, CompletionManifest] = field(default_factory=dict)  # only when asked for
    resumed_tasks: int = 0
    stage_times: dict[tuple[str, str], StageTime] = field(default_factory=dict)  # (stage, node) → summed
    # The stages' CPU seconds and the elements' wall time (process start to manifest) of the
    # manifests that record both: how many cores the elements kept busy.
    busy_cpu_s: float = 0.0
    busy_wall_s: float = 0.0

    def merge(self, other: ManifestScan) -> None:
        self.shards |= other.shards
        self.manifests.update(other.manifests)
        self.counts = self.counts + other.counts
        self.durations += other.durations
        self.errors += other.errors
        self.resumed_tasks += other.resumed_tasks
        add_stage_times(self.stage_times, other.stage_times.values())
        self.busy_cpu_s += other.busy_cpu_s
        self.busy_wall_s += other.busy_wall_s

    def add(self, manifest: CompletionManifest, keep: bool) -> None:
        self.shards.add(manifest.shard_index)
        if keep:
            self.manifests[manifest.shard_index] = manifest
        self.counts = self.counts + manifest.work.counts
        if manifest.duration_s is not None:
            self.durations.append(manifest.duration_s)
        self.resumed_tasks += manifest.resumed_tasks
        add_stage_times(self.stage_times, manifest.stages)
        if manifest.stages and manifest.timeline_s.get("manifest"):
            self.busy_cpu_s += sum(stage.cpu_s for stage in manifest.stages)
            self.busy_wall_s += manifest.timeline_s["manifest"]


def manifest_problem(manifest: CompletionManifest, run: RunConfig) -> str | None:
    """Why a well-formed manifest does not belong to this run, or None."""
    if (manifest.total_shards, manifest.minimum_shard_index) != (run.total_shards, run.minimum_shard_index):
        return (
            f"written for total_shards={manifest.total_shards}, minimum_shard_index={manifest.minimum_shard_index} "
            f"but run.json has total_shards={run.total_shards}, minimum_shard_index={run.minimum_shard_index}: "
            "it belongs to another run"
        )
    if manifest.shard_index not in run.shards:
        return f"shard_index {manifest.shard_index} is outside the run's range {run.shards}"
    if run.run_id and manifest.run_id and manifest.run_id != run.run_id:
        return f"written for run {manifest.run_id} but run.json is run {run.run_id}: it belongs to an archived run"
    return None


def _read_all(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _scan_manifest_files(directory: str, names: list[str], run: RunConfig, keep: bool = False) -> ManifestScan:
    """Read and check a list of manifests; runs in a worker process for large runs."""
    scan = ManifestScan()
    for name in names:
        try:
            manifest = CompletionManifest.from_json(json.loads(_read_all(os.path.join(directory, name))))
        except ValueError as exc:  # RecordError and JSONDecodeError
            scan.errors.append((name, str(exc) if isinstance(exc, RecordError) else f"not valid JSON ({exc})"))
            continue
        except OSError as exc:
            scan.errors.append((name, f"unreadable ({exc.strerror})"))
            continue
        problem = manifest_problem(manifest, run)
        if problem:
            scan.errors.append((name, problem))
            continue
        scan.add(manifest, keep)
    return scan


def scan_completion_manifests(layout: CheckpointLayout, run: RunConfig, keep: bool = False) -> ManifestScan:
    """Every completion manifest, checked against run.json; the first bad one is an error.
    ``keep`` returns the manifests themselves too (``ManifestScan.manifests``).

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


def manifest_exists(layout: CheckpointLayout, shard_index: int) -> bool:
    return layout.manifest_path(shard_index).is_file()


def supersede_manifest(layout: CheckpointLayout, shard_index: int) -> Path:
    """Move a complete shard's manifest aside (``superseded/``) so the shard runs again: the
    run grew tasks it owns. Its finished tasks stay on record and are not run again."""
    target = layout.completion_dir / "superseded" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{shard_index}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(layout.manifest_path(shard_index), target)
    return target


@dataclass(frozen=True)
class FoundAttempt:
    """An attempt record on disk: the record, or why it could not be read."""

    path: Path
    record: AttemptRecord | None
    unreadable: str | None = None


def find_attempt_records(layout: CheckpointLayout) -> list[FoundAttempt]:
    """Every failed_tasks.json and attempt_error.json of every attempt, in path order.

    An unreadable record is reported, not fatal: it describes a failure, and the shard's
    completion is decided by manifests alone.
    """
    root = layout.failed_tasks_root
    if not root.is_dir():
        return []
    paths = sorted(p for p in root.rglob("*.json") if p.name in (FAILED_TASKS_FILE, ATTEMPT_ERROR_FILE))
    found = []
    for path in paths:
        try:
            found.append(FoundAttempt(path, AttemptRecord.read(path)))
        except (OSError, CorruptCheckpointError) as exc:
            found.append(FoundAttempt(path, None, str(exc)))
    return found

"""Run one prepared logical shard at the driver, and record the outcome.

What comes before (``prepare``): the run's contract and this shard's tasks. Then, here:
run only this shard's tasks → write failed_tasks.json as soon as a failure is seen →
write the completion manifest only if nothing failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.layout import AttemptId, utc_now
from ..core.records import AttemptRecord, CompletionManifest, FailedTaskRecord, ShardWork
from ..core.sharding import ShardConfig
from ..slurm.jobenv import JobEnvironment
from ..stages.tasks import FailedTask, Task, TaskCounters, WrittenFiles
from .prepare import PreparedShard
from .progress import ProgressReporter
from .timeline import Timeline

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED_TASKS = 3


@dataclass
class ShardOutcome:
    status: str  # "completed", "skipped", "failed"
    shard: ShardConfig
    manifest_path: Path | None = None
    failed_tasks_path: Path | None = None
    failures: list[FailedTask] = field(default_factory=list)
    work: ShardWork = field(default_factory=ShardWork)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED_TASKS if self.status == "failed" else EXIT_OK


def run_prepared(
    prepared: PreparedShard,
    execute: Callable[[Sequence, Sequence[Task]], Iterable[Task]],
    job: JobEnvironment,
    attempt: AttemptId,
    cluster_nodes: Callable[[], list[dict[str, Any]]] = list,
    output_dir: str | Path | None = None,
    health_check: Callable[[], None] | None = None,
    timeline: Timeline | None = None,
    progress_interval_s: float = 0.0,
) -> ShardOutcome:
    """Execute the shard's tasks and write the manifest or the failed-task record."""
    timeline = timeline or Timeline()
    progress = ProgressReporter(len(prepared.tasks), prepared.input_bytes, progress_interval_s)
    shard, layout = prepared.shard, prepared.layout
    started_at, began = utc_now(), time.monotonic()
    nodes = cluster_nodes() if prepared.tasks else []
    failures: list[FailedTask] = []
    failed_path: Path | None = None
    written: list[WrittenFiles] = []
    stray = 0
    with progress:
        for result in execute(prepared.pipeline.stages, prepared.tasks):
            timeline.mark("first_result", once=True)
            progress.record(result)
            stray += _record_result(result, failures, written)
            if isinstance(result, FailedTask):
                failed = tuple(FailedTaskRecord(f.task_id, f.stage, f.reason) for f in failures)
                failed_path = AttemptRecord.of(attempt, shard, job.identity(), failed_tasks=failed).write(layout, attempt)
            if health_check is not None:
                health_check()
    timeline.mark("last_result")
    if stray:
        logger.warning("%d result(s) left the last stage without being written", stray)
    work = _shard_work(prepared, written, output_dir)
    if health_check is not None:
        health_check()
    if failures:
        return ShardOutcome("failed", shard, failed_tasks_path=failed_path, failures=failures, work=work)
    ended_at = utc_now()
    timeline.mark("manifest")
    manifest = CompletionManifest.of(
        shard,
        run_id=prepared.run.run_id,
        work=work,
        source_task_count_in_run=prepared.total_source_tasks,
        started_at=started_at,
        ended_at=ended_at,
        duration_s=round(time.monotonic() - began, 3),
        attempt=str(attempt),
        job=job.identity(),
        hostnames=tuple(sorted({n.get("hostname") or "" for n in nodes} | {job.hostname})),
        ray_nodes=tuple(nodes),
        timeline_s=timeline.as_dict(),
    )
    return ShardOutcome("completed", shard, manifest_path=manifest.write(layout), work=work)


def _record_result(result: Task, failures: list[FailedTask], written: list[WrittenFiles]) -> int:
    """File one result; returns 1 for a result that is neither written nor failed."""
    if isinstance(result, FailedTask):
        failures.append(result)
        logger.error("task %s failed in stage %s: %s", result.task_id, result.stage, result.reason)
        return 0
    if isinstance(result, WrittenFiles):
        written.append(result)
        logger.info("task %s: %d rows written to %s", result.task_id, result.rows_written, ", ".join(result.files))
        return 0
    return 1


def _shard_work(prepared: PreparedShard, written: list[WrittenFiles], output_dir) -> ShardWork:
    files = sorted(f for w in written for f in w.files)
    if output_dir is not None:
        root = Path(output_dir).resolve()
        resolved = [(f, Path(f).resolve()) for f in files]
        files = [r.relative_to(root).as_posix() if r.is_relative_to(root) else f for f, r in resolved]
    counters = sum((w.counters for w in written), TaskCounters())
    return ShardWork.with_files(
        tuple(files),
        source_tasks=len(prepared.tasks),
        source_task_ids=tuple(sorted(t.task_id for t in prepared.tasks)),
        tasks_written=len({w.task_id for w in written}),
        rows_in=counters.rows_read,
        rows_out=sum(w.rows_written for w in written),
        bytes_in=counters.bytes_read,
        rows_dropped_by_stage=counters.dropped,
        records_skipped=counters.skipped,
        output_dir=str(output_dir) if output_dir is not None else None,
    )

"""Run one prepared logical shard at the driver, and record the outcome.

What comes before (``prepare``): the run's contract, this shard's tasks, and those an
earlier attempt already finished. Then, here: run the tasks left, each output part
recorded by the worker that wrote it as soon as it is in place (``recording``) → write
failed_tasks.json as soon as a failure is seen → write the completion manifest only if
nothing failed; it counts the tasks of every attempt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.layout import AttemptId, utc_now
from ..core.records.attempt import AttemptRecord, FailedTaskRecord
from ..core.records.shard import (
    AttemptShare,
    CompletionManifest,
    ShardWork,
    StageTime,
    add_stage_times,
)
from ..core.sharding import ShardConfig
from ..core.task_records import RecordHeader, attempt_shares, start_task_records
from ..slurm.jobenv import JobEnvironment
from ..stages.output_files import remove_leftovers
from ..stages.tasks import FailedTask, PartShown, Task, TaskCounters, WrittenFiles
from ..storage.s3 import is_s3
from .prepare import PreparedShard, output_root
from .progress import ProgressReporter
from .recording import RecordParts, TaskCompletion, relative_to
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
    recording_s: float = 0.0  # what following finished tasks cost the driver (the workers record them)

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
    record_tasks: bool = True,
) -> ShardOutcome:
    """Execute the shard's tasks and write the manifest or the failed-task record.

    ``record_tasks`` records each task as it finishes, so a rerun can skip it; only a
    benchmark measuring what that costs turns it off.
    """
    timeline = timeline or Timeline()
    progress = ProgressReporter(len(prepared.tasks), prepared.input_bytes, progress_interval_s)
    shard, layout = prepared.shard, prepared.layout
    started_at, began = utc_now(), time.monotonic()
    nodes = cluster_nodes() if prepared.tasks else []
    failures: list[FailedTask] = []
    failed_path: Path | None = None
    written: list[WrittenFiles] = []
    shown: list[PartShown] = []  # the writer's time and rows of parts whose files closed later
    root = output_root(prepared.pipeline)
    recording, recording_s = record_tasks and bool(prepared.tasks), 0.0
    finished = TaskCompletion(root, str(attempt), check_files=recording)
    stray = 0
    stages = list(prepared.pipeline.stages)
    if recording:
        header = RecordHeader(prepared.run.run_id, shard.shard_index, shard.total_shards, shard.minimum_shard_index,
                              str(attempt), prepared.shard_tasks)
        parts = start_task_records(layout, attempt, header)
        stages.append(RecordParts(parts, root, str(attempt), like=stages[-1]))
    with progress:
        for result in execute(stages, prepared.tasks):
            timeline.mark("first_result", once=True)
            stray += _record_result(result, failures, written, shown)
            began_recording = time.perf_counter()
            progress.record(result, finished=finished.add(result) is not None)
            recording_s += time.perf_counter() - began_recording
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
        return ShardOutcome("failed", shard, failed_tasks_path=failed_path, failures=failures, work=work,
                            recording_s=recording_s)
    _remove_leftovers(prepared, work)
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
        attempts=_attempt_shares(prepared, finished, str(attempt)),
        stages=stage_times([*written, *shown], stages),
    )
    return ShardOutcome("completed", shard, manifest_path=manifest.write(layout), work=work, recording_s=recording_s)


def _remove_leftovers(prepared: PreparedShard, work: ShardWork) -> None:
    """Once every task of the shard is finished, what writers killed in earlier attempts left
    of its tasks is garbage: partial files and incomplete uploads (up to a file's size each),
    and files put in place but never recorded (``output_files.remove_leftovers``)."""
    writer = prepared.pipeline.writer
    places = [writer.place, *writer.removed_places()]
    partials, unrecorded = remove_leftovers(places, [*(task.task_id for task in prepared.tasks), *prepared.done],
                                            writer.suffix, work.output_files)
    if partials:
        logger.info("shard %d: %d partial file(s) that killed writers left removed", prepared.shard.shard_index,
                    partials)
    for name in unrecorded:
        logger.warning("shard %d: %s was put in place by a killed attempt and never recorded; its task was written "
                       "again, so it is removed", prepared.shard.shard_index, name)


def stage_times(written: Iterable[Task], stages: Sequence) -> tuple[StageTime, ...]:
    """Where this attempt's time went, per stage and node, in the pipeline's order."""
    totals: dict[tuple[str, str], StageTime] = {}
    for result in written:
        add_stage_times(totals, result.counters.times)
    order = {stage.stage_name: index for index, stage in enumerate(stages)}
    return tuple(sorted(totals.values(), key=lambda t: (order.get(t.stage, len(order)), t.node)))


def _attempt_shares(prepared: PreparedShard, finished: TaskCompletion, attempt: str) -> tuple[AttemptShare, ...]:
    if not prepared.done:
        return ()
    shares = attempt_shares({**prepared.done, **finished.records})
    shares.setdefault(attempt, AttemptShare(attempt))
    return tuple(shares.values())


def _record_result(result: Task, failures: list[FailedTask], written: list[WrittenFiles], shown: list[PartShown]) -> int:
    """File one result; returns 1 for a result that is neither written nor failed."""
    if isinstance(result, FailedTask):
        if all(failure.task_id != result.task_id for failure in failures):  # a cut task may fail in several parts
            failures.append(result)
        logger.error("task %s failed in stage %s: %s", result.task_id, result.stage, result.reason)
        return 0
    if isinstance(result, PartShown):
        shown.append(result)
        return 0
    if isinstance(result, WrittenFiles):
        written.append(result)
        skipped = "".join(f", {count} {reason.replace('_', ' ')} skipped" for reason, count in sorted(result.counters.skipped.items())
                          if count)
        if result.files:
            logger.info("task %s: %d rows written to %s%s", result.task_id, result.rows_written,
                        ", ".join(result.files), skipped)
        else:
            logger.info("task %s%s: no rows left, no file written%s", result.task_id,
                        f" part {result.part}" if result.part is not None else "", skipped)
        return 0
    return 1


def _shard_work(prepared: PreparedShard, written: list[WrittenFiles], output_dir) -> ShardWork:
    """This attempt's work plus the tasks earlier attempts finished."""
    unchecked = [f for w in written if not w.checks for f in w.files]
    root = Path(output_dir).resolve() if unchecked and output_dir is not None and not is_s3(output_dir) else None
    files = {name for w in written for name, _, _ in w.checks} | {relative_to(root, f) for f in unchecked}
    counters = sum((w.counters for w in written), TaskCounters())
    rows_out = sum(w.rows_written for w in written)
    for record in prepared.done.values():
        files.update(name for name, _, _ in record.files)
        counters = counters + TaskCounters(record.rows_in, record.bytes_in, record.dropped, record.skipped,
                                           record.tokens, contamination=record.contamination,
                                           tallies=record.tallies)
        rows_out += record.rows_out
    ids = [t.task_id for t in prepared.tasks] + list(prepared.done)
    return ShardWork.of(
        tuple(sorted(files)),
        source_tasks=len(ids),
        source_task_ids=tuple(sorted(ids)),
        task_inputs=dict(sorted(prepared.inputs.items())),
        tasks_written=len({w.task_id for w in written} | set(prepared.done)),
        tasks_without_output=len(({w.task_id for w in written} - {w.task_id for w in written if w.files})
                                 | {task for task, record in prepared.done.items() if not record.files}),
        rows_in=counters.rows_read,
        rows_out=rows_out,
        bytes_in=counters.bytes_read,
        rows_dropped_by_stage=counters.dropped,
        records_skipped=counters.skipped,
        tallies=counters.tallies,
        tokens=counters.tokens,
        contamination=counters.contamination,
        output_dir=str(output_dir) if output_dir is not None else None,
    )

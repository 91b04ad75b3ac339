"""What a checkpoint says about a logical run: complete, incomplete, failed attempts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .arrays import format_array_expression
from .checkpoint import CheckpointLayout, find_failed_attempt_records, read_run_config, scan_completion_manifests
from .sharding import ShardRange


@dataclass(frozen=True)
class FailedAttempt:
    path: Path
    shard_index: int | None
    attempt: str
    failed_task_count: int
    shard_completed_later: bool
    error: str | None = None
    unreadable: str | None = None


@dataclass
class RunStatus:
    checkpoint: Path
    shards: ShardRange
    source_task_count: int | None
    completed: list[int]
    incomplete: list[int]
    failed_attempts: list[FailedAttempt]
    totals: dict[str, int] = field(default_factory=dict)
    duration_s: dict[str, float] = field(default_factory=dict)
    queued: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_path": str(self.checkpoint),
            **self.shards.to_json(),
            "source_task_count": self.source_task_count,
            "completed_count": len(self.completed),
            "incomplete_count": len(self.incomplete),
            "incomplete": format_array_expression(self.incomplete),
            "failed_attempts": [
                {
                    "path": str(a.path),
                    "shard_index": a.shard_index,
                    "attempt": a.attempt,
                    "failed_task_count": a.failed_task_count,
                    "shard_completed_later": a.shard_completed_later,
                    "error": a.error,
                    "unreadable": a.unreadable,
                }
                for a in self.failed_attempts
            ],
            "totals": self.totals,
            "duration_s": self.duration_s,
            "pending": format_array_expression(s for s, state in self.queued.items() if state == "PENDING"),
            "running": format_array_expression(s for s, state in self.queued.items() if state != "PENDING"),
        }


def collect_status(layout: CheckpointLayout) -> RunStatus:
    run = read_run_config(layout)
    scan = scan_completion_manifests(layout, run)
    manifests = scan.shards
    completed = [s for s in run.shards if s in manifests]
    incomplete = [s for s in run.shards if s not in manifests]
    totals, durations = scan.totals, scan.durations
    failed = []
    for path, payload in find_failed_attempt_records(layout):
        shard = payload.get("shard_index")
        failed.append(
            FailedAttempt(
                path=path,
                shard_index=shard if isinstance(shard, int) else None,
                attempt=str(payload.get("attempt", "?")),
                failed_task_count=len(payload.get("failed_tasks") or []),
                shard_completed_later=shard in manifests,
                error=payload.get("error"),
                unreadable=payload.get("unreadable"),
            )
        )
    duration_summary = (
        {"min": min(durations), "mean": sum(durations) / len(durations), "max": max(durations)}
        if durations
        else {}
    )
    return RunStatus(
        checkpoint=layout.root,
        shards=run.shards,
        source_task_count=run.source_task_count,
        completed=completed,
        incomplete=incomplete,
        failed_attempts=failed,
        totals=totals,
        duration_s=duration_summary,
    )


def format_status(status: RunStatus) -> str:
    lines = [
        f"checkpoint   {status.checkpoint}",
        f"shards       {status.shards.total} (logical {status.shards})",
        f"complete     {len(status.completed)}/{status.shards.total}",
        f"incomplete   {format_array_expression(status.incomplete) or '-'}",
    ]
    if status.queued:
        pending = [s for s, state in status.queued.items() if state == "PENDING"]
        running = [s for s, state in status.queued.items() if state != "PENDING"]
        lines.append(f"in queue     pending {format_array_expression(pending) or '-'}, "
                     f"running {format_array_expression(running) or '-'} (squeue)")
    if status.source_task_count is not None:
        lines.append(f"source tasks {status.source_task_count} in the whole run")
    t = status.totals
    lines.append(
        f"done so far  {t['source_tasks']} tasks, {t['rows_in']} rows in, {t['rows_out']} rows out, "
        f"{t['output_file_count']} output files"
    )
    if status.duration_s:
        d = status.duration_s
        lines.append(f"shard time   min {d['min']:.1f}s, mean {d['mean']:.1f}s, max {d['max']:.1f}s")
    if status.failed_attempts:
        lines.append(f"failed attempts ({len(status.failed_attempts)}):")
        for attempt in status.failed_attempts:
            later = " (shard completed later)" if attempt.shard_completed_later else ""
            if attempt.unreadable:
                what = f"unreadable record ({attempt.unreadable})"
            elif attempt.error:
                what = f"ended early: {attempt.error}"
            else:
                what = f"{attempt.failed_task_count} failed task(s)"
            lines.append(f"  shard {attempt.shard_index}: {what}{later}  {attempt.path}")
    return "\n".join(lines) + "\n"

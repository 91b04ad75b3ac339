"""What a checkpoint says about a logical run: complete, incomplete, failed attempts."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .arrays import format_array_expression
from .checkpoint import find_attempt_records, scan_completion_manifests
from .layout import CheckpointLayout
from .phases import DedupSettings, PhaseState, blocked_by, phase_states
from .records import CompletionManifest, PinnedRequest, WorkTotals
from .run_contract import read_run_config
from .sharding import ShardRange
from .task_records import count_done


@dataclass(frozen=True)
class FailedAttempt:
    path: Path
    shard_index: int | None
    attempt: str
    failed_task_count: int
    shard_completed_later: bool
    error: str | None = None
    unreadable: str | None = None
    first_failure: str | None = None  # "<task id> in <stage>: <reason>" of the first failed task

    @property
    def reason(self) -> str:
        if self.unreadable:
            return f"unreadable record ({self.unreadable})"
        if self.error:
            return f"ended early: {self.error}"
        first = f" (first: {self.first_failure})" if self.first_failure else ""
        return f"{self.failed_task_count} failed task(s){first}"


@dataclass
class RunStatus:
    checkpoint: Path
    shards: ShardRange
    source_task_count: int | None
    completed: list[int]
    incomplete: list[int]
    failed_attempts: list[FailedAttempt]
    totals: WorkTotals = field(default_factory=WorkTotals)
    duration_s: dict[str, float] = field(default_factory=dict)
    queued: dict[int, str] = field(default_factory=dict)
    manifests: dict[int, CompletionManifest] = field(default_factory=dict)  # per complete shard, when asked for
    partial: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # shard → (tasks done, of, attempts)
    resumed_tasks: int = 0  # tasks complete shards took from earlier attempts instead of running them again
    request_id: str | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # option → {"value", "source"}
    phases: list[PhaseState] = field(default_factory=list)  # curation, then the dedup phases (none without)
    queued_phases: dict[str, dict[int, str]] = field(default_factory=dict)  # dedup phase → element → state

    @property
    def all_complete(self) -> bool:
        return not self.incomplete and all(state.is_complete for state in self.phases)

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
            "totals": self.totals.to_json(),
            "partial": {str(shard): {"tasks_done": done, "tasks": total, "attempts": attempts}
                        for shard, (done, total, attempts) in sorted(self.partial.items())},
            "resumed_tasks": self.resumed_tasks,
            "request": self.request_id,
            "options": self.options,
            "duration_s": self.duration_s,
            "pending": format_array_expression(s for s, state in self.queued.items() if state == "PENDING"),
            "running": format_array_expression(s for s, state in self.queued.items() if state != "PENDING"),
            "phases": [phase_json(state, self.phases, self.queued_phases.get(state.phase, {}))
                       for state in self.phases[1:]],
        }


def phase_json(state: PhaseState, states: list[PhaseState], queued: dict[int, str]) -> dict[str, Any]:
    waiting = blocked_by(states, state.phase)
    return {
        "phase": state.phase, "elements": state.elements.total, "complete": len(state.complete),
        "missing": format_array_expression(state.missing), "queued": format_array_expression(queued),
        "failed": {str(i): reason for i, reason in sorted(state.failed.items())},
        "blocked_by": waiting.phase if waiting is not None and not state.is_complete else None,
        "counts": {name: state.total(name) for name in ("documents", "pairs", "removed", "rows_in", "rows_out")
                   if any(name in m.counts for m in state.manifests.values())},
    }


def format_phases(status: RunStatus) -> list[str]:
    """One line per dedup phase: complete, or what is missing, failed, queued, or blocks it."""
    lines = ["phases"]
    for state in status.phases[1:]:
        done = f"{len(state.complete)}/{state.elements.total}"
        queued = status.queued_phases.get(state.phase, {})
        if state.is_complete:
            figures = phase_json(state, status.phases, queued)["counts"]
            shown = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in figures.items())
            lines.append(f"  {state.phase:<11}{done} complete" + (f" ({shown})" if shown else ""))
            continue
        parts = [f"missing {format_array_expression(state.missing)}"]
        if queued:
            parts.append(f"queued {format_array_expression(queued)}")
        waiting = blocked_by(status.phases, state.phase)
        if waiting is not None:
            parts.append(f"blocked by {waiting.phase} (missing {format_array_expression(waiting.missing)})")
        lines.append(f"  {state.phase:<11}{done}; " + "; ".join(parts))
        for index, reason in sorted(state.failed.items())[:5]:
            lines.append(f"    element {index} failed: {reason}")
    return lines


def option_lines(options: dict[str, dict[str, Any]]) -> list[str]:
    """``name=value (source)`` for every option not at its default."""
    lines = []
    for name, setting in sorted(options.items()):
        if setting.get("source") == "default":
            continue
        value = setting.get("value")
        shown = ",".join(map(str, value)) if isinstance(value, list) else "1" if value is True else str(value)
        lines.append(f"{name}={shown} ({setting.get('source')})")
    return lines


def collect_status(layout: CheckpointLayout, keep_manifests: bool = False, request_id: str | None = None) -> RunStatus:
    """What the checkpoint says; ``keep_manifests`` also returns every complete shard's manifest.

    The options shown are those of ``request_id`` (the latest submission's, which the
    caller knows), else those the run's first start pinned.
    """
    run = read_run_config(layout)
    request_id = request_id or run.request
    options = PinnedRequest.read(layout, request_id).settings if request_id else {}
    scan = scan_completion_manifests(layout, run, keep_manifests)
    manifests = scan.shards
    failed = []
    for found in find_attempt_records(layout):
        record = found.record
        shard = record.shard_index if record else None
        failed.append(
            FailedAttempt(
                path=found.path,
                shard_index=shard,
                attempt=record.attempt if record else "?",
                failed_task_count=len(record.failed_tasks) if record else 0,
                first_failure=record.failed_tasks[0].describe() if record and record.failed_tasks else None,
                shard_completed_later=shard in manifests,
                error=record.error if record else None,
                unreadable=found.unreadable,
            )
        )
    durations = scan.durations
    duration_summary = (
        {"min": min(durations), "mean": sum(durations) / len(durations), "max": max(durations)}
        if durations
        else {}
    )
    return RunStatus(
        checkpoint=layout.root,
        shards=run.shards,
        source_task_count=run.source_task_count,
        completed=[s for s in run.shards if s in manifests],
        incomplete=[s for s in run.shards if s not in manifests],
        failed_attempts=failed,
        totals=scan.totals,
        duration_s=duration_summary,
        manifests=scan.manifests,
        request_id=request_id,
        options=options,
        partial=partial_shards(layout, set(manifests)),
        resumed_tasks=scan.resumed_tasks,
        phases=_phases(layout, run, set(manifests)),
    )


def _phases(layout: CheckpointLayout, run, curated: set[int]) -> list[PhaseState]:
    settings = DedupSettings.of_pipeline(run.pipeline)
    return phase_states(layout, settings, run.shards, run.run_id, curated) if settings else []


def partial_shards(layout: CheckpointLayout, complete: set[int]) -> dict[int, tuple[int, int, int]]:
    """Incomplete shards with finished tasks on record: (tasks done, tasks in the shard, attempts)."""
    root = layout.task_records_root
    if not root.is_dir():
        return {}
    partial = {}
    for entry in os.scandir(root):
        shard = entry.name.removeprefix("shard_")
        if shard.isdigit() and int(shard) not in complete:
            done, total, attempts = count_done(layout, int(shard))
            if done:
                partial[int(shard)] = (done, total, attempts)
    return partial


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
        f"done so far  {t.source_tasks} tasks, {t.rows_in} rows in, {t.rows_out} rows out, "
        f"{t.output_file_count} output files"
    )
    if status.request_id:
        chosen = option_lines(status.options)
        lines.append(f"options      {len(chosen)} set, the rest default (request {status.request_id}):")
        lines += [f"  {line}" for line in chosen]
    if status.duration_s:
        d = status.duration_s
        lines.append(f"shard time   min {d['min']:.1f}s, mean {d['mean']:.1f}s, max {d['max']:.1f}s")
    if status.partial:
        lines.append(f"resumable    {len(status.partial)} incomplete shard(s) keep finished tasks for their next attempt:")
        for shard, (done, total, attempts) in sorted(status.partial.items())[:20]:
            lines.append(f"  shard {shard}: {done}/{total or '?'} tasks done in {attempts} attempt(s)")
    if status.resumed_tasks:
        lines.append(f"resumed      {status.resumed_tasks} task(s) of complete shards were kept from earlier attempts")
    if status.phases:
        lines += format_phases(status)
    if status.failed_attempts:
        lines.append(f"failed attempts ({len(status.failed_attempts)}):")
        for attempt in status.failed_attempts:
            later = " (shard completed later)" if attempt.shard_completed_later else ""
            lines.append(f"  shard {attempt.shard_index}: {attempt.reason}{later}  {attempt.path}")
    return "\n".join(lines) + "\n"


def shard_states(status: RunStatus) -> dict[str, list[int]]:
    """Every shard in one state: complete, running, pending, failed (an attempt failed and
    nothing of it is queued), or waiting (not started, or stopped without a record)."""
    failed_shards = {a.shard_index for a in status.failed_attempts if not a.shard_completed_later}
    complete = set(status.completed)
    states: dict[str, list[int]] = {"complete": [], "running": [], "pending": [], "failed": [], "waiting": []}
    for shard in status.shards:
        queued = status.queued.get(shard)
        if shard in complete:
            states["complete"].append(shard)
        elif queued == "PENDING":
            states["pending"].append(shard)
        elif queued:
            states["running"].append(shard)
        elif shard in failed_shards:
            states["failed"].append(shard)
        else:
            states["waiting"].append(shard)
    return states


def format_watch(status: RunStatus, now: str) -> str:
    states = shard_states(status)
    counts = ", ".join(f"{name} {len(shards)}" for name, shards in states.items())
    lines = [f"{now}  {status.checkpoint}", f"{len(states['complete'])}/{status.shards.total} complete: {counts}"]
    for name in ("running", "pending", "failed", "waiting"):
        if states[name]:
            lines.append(f"  {name:<8}{format_array_expression(states[name])}")
    latest = {a.shard_index: a for a in status.failed_attempts if a.shard_index in states["failed"]}
    for shard, attempt in sorted(latest.items())[:10]:
        lines.append(f"  shard {shard}: {attempt.reason}  {attempt.path}")
    if status.phases:
        lines += format_phases(status)
    return "\n".join(lines) + "\n"


def watch(collect, echo, sleep, clock_text, interval_s: float, clear: bool) -> int:
    """Refresh until every shard is complete (0) or nothing is left queued (3, with shards left).

    ``collect`` returns a RunStatus with ``queued`` filled from squeue; the rest is injected
    so the loop can be tested without a terminal or a clock.
    """
    while True:
        status = collect()
        states = shard_states(status)
        echo(("\x1b[H\x1b[2J" if clear else "") + format_watch(status, clock_text()))
        if status.all_complete:
            echo("every shard is complete" + (" and every dedup phase\n" if status.phases else "\n"))
            return 0
        if not status.queued and not status.queued_phases:
            left = status.shards.total - len(states["complete"])
            phase = next((state for state in status.phases[1:] if not state.is_complete), None)
            what = (f"{left} shard(s) incomplete" if left or phase is None else
                    f"dedup phase {phase.phase} incomplete (missing {format_array_expression(phase.missing)})")
            echo(f"nothing of this run is queued any more; {what}: curator-array retry --checkpoint-path "
                 f"{status.checkpoint} --submit --site <site>\n")
            return 3
        sleep(interval_s)

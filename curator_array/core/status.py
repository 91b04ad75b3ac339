"""What a checkpoint says about a logical run: complete, incomplete, failed attempts, and
every phase after the first. Data only; the CLI renders it (``cli.status_view``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .amendments import Amendment, read_amendments
from .arrays import format_array_expression
from .checkpoint import find_attempt_records, scan_completion_manifests
from .curation_counts import CurationCounts
from .layout import CheckpointLayout
from .phase import OutputChain, PhaseState, PlannedPhase
from .phase_states import blocked_by, phase_states
from .records.contamination import Contamination
from .records.run import OptionValue, PinnedRequest
from .records.shard import CompletionManifest, StageTime, per_stage
from .run_contract import RunConfig, read_run_config
from .sharding import ShardRange
from .tallies import Tallies
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


# Keys of ``status --json`` kept for a release beside the ones that replace them.
DEPRECATED_KEYS = {
    "totals": "run.phases[0].counts (the first phase's figures)",
    "final_rows_out": "run.final.rows",
    "completed_count": "run.phases[0].complete",
    "incomplete": "run.phases[0].missing",
    "incomplete_count": "run.phases[0].elements minus run.phases[0].complete",
    "phases": "run.phases[1:] (every phase after the first)",
    "records_skipped": "run.phases[0].counts.records_skipped",
    "lines_removed": "run.phases[0].counts.lines_removed",
    "would_drop_any": "run.phases[0].counts.would_drop_any",
    "contamination": "run.phases[0].counts.contamination",
}
DEPRECATED_TOTALS = ("source_tasks", "rows_in", "rows_out", "output_file_count", "tokens")


@dataclass(frozen=True)
class FinalFigures:
    """The run's output after the last phase that rewrites it (``writer``): its documents,
    files and tokens. A figure is None while that phase is incomplete, or when no phase
    counts it (files of a rewriting phase; tokens without --tokenize)."""

    writer: str
    complete: bool
    rows: int | None
    files: int | None
    tokens: int | None

    @classmethod
    def of(cls, states: list[PhaseState], writer: PhaseState) -> FinalFigures:
        """The first phase's figures count from its first shard on (the rows written so far);
        a later writer's only once it is complete. Tokens are counted by the first phase
        after the writer whose counts have them (tokenize), else by the writer itself."""
        known = writer is states[0] or writer.is_complete
        totals = writer.totals()
        counters = [state for state in states[states.index(writer) + 1:] if _counts_field(state, "tokens")]
        tokens = None
        if counters:
            tokens = counters[0].totals().tokens if counters[0].is_complete else None
        elif _counts_field(writer, "tokens") and totals.tokens:
            tokens = totals.tokens
        return cls(writer.name, writer.is_complete,
                   totals.rows_out if known and _counts_field(writer, "rows_out") else None,
                   totals.output_file_count if known and _counts_field(writer, "output_file_count") else None,
                   tokens if known else None)

    def to_json(self) -> dict[str, Any]:
        return {"written_by": self.writer, "complete": self.complete, "rows": self.rows, "files": self.files,
                "tokens": self.tokens}


def _counts_field(state: PhaseState, name: str) -> bool:
    return name in {item.name for item in fields(state.phase.counts)}


@dataclass
class RunStatus:
    """The run as its checkpoint shows it: every phase's state (the first: its shards), the
    complete shards' figures, failed attempts, and what is still in SLURM's queue."""

    checkpoint: Path
    shards: ShardRange
    source_task_count: int | None
    phases: list[PhaseState]  # every phase of the run, the first one (its shards) first
    failed_attempts: list[FailedAttempt] = field(default_factory=list)
    duration_s: dict[str, float] = field(default_factory=dict)
    # element → squeue state, by the phase a submission names (``Phase.submitted_name``: None for the first)
    queued: dict[str | None, dict[int, str]] = field(default_factory=dict)
    manifests: dict[int, CompletionManifest] = field(default_factory=dict)  # per complete shard, when asked for
    partial: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # shard → (tasks done, of, attempts)
    resumed_tasks: int = 0  # tasks complete shards took from earlier attempts instead of running them again
    request_id: str | None = None
    options: dict[str, OptionValue] = field(default_factory=dict)
    stage_times: list[StageTime] = field(default_factory=list)  # complete shards' time, per stage and node
    busy: tuple[float, float] = (0.0, 0.0)  # the stages' CPU seconds, and the elements' wall seconds
    amendments: list[Amendment] = field(default_factory=list)  # repairs, oldest first (--repair)
    submitted: bool = True  # queued by submit or retry --submit, so resubmitted the same way; False: run by hand

    @property
    def totals(self) -> CurationCounts:
        """What the first phase's complete shards counted together."""
        return self.phases[0].totals()

    @property
    def dropped(self) -> dict[str, int]:
        """The first phase's drops, by step and rule."""
        return self.totals.rows_dropped_by_stage

    @property
    def records_skipped(self) -> dict[str, int]:
        return self.totals.records_skipped

    @property
    def contamination(self) -> Contamination:
        """What decontamination found in the first phase."""
        return self.totals.contamination

    @property
    def tallies(self) -> Tallies:
        return Tallies.of_counts(self.totals)

    @property
    def annotated(self) -> bool:
        """Whether the run marks what its rules would drop instead of dropping it (``--annotate``):
        its drop counts are what a plain run would drop."""
        return bool(getattr(self.options.get("annotate"), "value", False))

    @property
    def cores_busy(self) -> float | None:
        """How many cores the elements kept busy: their stages' CPU seconds (as the manifests
        record them) over their wall time from process start to manifest."""
        cpu, wall = self.busy
        return round(cpu / wall, 2) if wall else None

    @property
    def stage_totals(self) -> list[StageTime]:
        """The complete shards' time per stage, summed over nodes."""
        return per_stage(self.stage_times)

    def stage_tables(self) -> list[tuple[str, list[StageTime]]]:
        """("all nodes", the time per stage), then (node, its stages) for each node when there are several."""
        nodes = sorted({time.node for time in self.stage_times})
        tables = [("all nodes", self.stage_totals)]
        if len(nodes) > 1:
            tables += [(node, [time for time in self.stage_times if time.node == node]) for node in nodes]
        return tables

    @property
    def later_phases(self) -> list[PhaseState]:
        """The phases after the first (the first is the run's shards)."""
        return self.phases[1:]

    @property
    def completed(self) -> list[int]:
        return list(self.phases[0].complete)

    @property
    def incomplete(self) -> list[int]:
        return list(self.phases[0].missing)

    def queued_of(self, state: PhaseState) -> dict[int, str]:
        """The phase's elements still in SLURM's queue, with their state."""
        return self.queued.get(state.phase.submitted_name, {})

    @property
    def shards_queued(self) -> dict[int, str]:
        return self.queued_of(self.phases[0])

    @property
    def all_complete(self) -> bool:
        return all(state.is_complete for state in self.phases)

    @property
    def last_writer(self) -> PhaseState:
        """The phase whose files are the run's output (``OutputChain.last``)."""
        last = OutputChain.of([state.phase for state in self.phases]).last
        return next(state for state in self.phases if state.phase is last)

    @property
    def final(self) -> FinalFigures:
        """The run's output as the last phase that rewrites it left it."""
        return FinalFigures.of(self.phases, self.last_writer)

    @property
    def final_rows_out(self) -> int | None:
        """Deprecated: ``final.rows``."""
        return self.final.rows

    def dropped_by_step(self) -> dict[str, int]:
        """Documents dropped, by step and rule, in the complete elements: the first phase's
        filters (``<stage>.<rule>``), then each phase that rewrites the output (``<phase>.removed``)."""
        dropped = dict(self.dropped)
        for state in self.later_phases:
            removed = getattr(state.totals(), "removed", 0) if state.phase.output_staged else 0
            if removed:
                dropped[f"{state.name}.removed"] = removed
        return {step: count for step, count in sorted(dropped.items(), key=lambda item: -item[1]) if count}

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_path": str(self.checkpoint),
            **self.shards.to_json(),
            "source_task_count": self.source_task_count,
            "completed_count": len(self.completed),
            "incomplete_count": len(self.incomplete),
            "incomplete": format_array_expression(self.incomplete),
            "tasks_done": self.totals.source_tasks + sum(done for done, _, _ in self.partial.values()),
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
            "run": {"phases": [phase_json(state, self.phases, self.queued_of(state)) for state in self.phases],
                    "final": self.final.to_json()},
            "totals": {name: value for name, value in self.totals.to_json().items()
                       if name in DEPRECATED_TOTALS and (value or name != "tokens")},
            "final_rows_out": self.final_rows_out,
            "dropped": self.dropped_by_step(),
            "records_skipped": self.records_skipped,
            **self.tallies.to_json(every=True),
            "contamination": self.contamination.to_json() if self.contamination else None,
            "amendments": [amendment.to_json() for amendment in self.amendments],
            "partial": {str(shard): {"tasks_done": done, "tasks": total, "attempts": attempts}
                        for shard, (done, total, attempts) in sorted(self.partial.items())},
            "resumed_tasks": self.resumed_tasks,
            "request": self.request_id,
            "options": {name: setting.to_json() for name, setting in self.options.items()},
            "duration_s": self.duration_s,
            "cores_busy": self.cores_busy,
            "pending": format_array_expression(s for s, state in self.shards_queued.items() if state == "PENDING"),
            "running": format_array_expression(s for s, state in self.shards_queued.items() if state != "PENDING"),
            "phases": [phase_json(state, self.phases, self.queued_of(state)) for state in self.later_phases],
            "stages": [stage_json(time) for time in self.stage_totals],
            "stages_per_node": [stage_json(time) for time in self.stage_times],
            **self.published(),
        }

    def published(self) -> dict[str, Any]:
        """What the complete later phases publish of the run (a corpus's statistics), by phase."""
        layout = CheckpointLayout(self.checkpoint)
        found = ((state.name, state.phase.published(layout)) for state in self.later_phases if state.is_complete)
        return {name: data for name, data in found if data is not None}


def stage_json(time: StageTime) -> dict[str, Any]:
    rate = time.rows_per_s
    return {**time.to_json(), "rows_per_s": round(rate, 1) if rate is not None else None}


def phase_json(state: PhaseState, states: list[PhaseState], queued: dict[int, str]) -> dict[str, Any]:
    waiting = blocked_by(states, state.phase)
    return {
        "phase": state.name, "elements": state.elements.total, "complete": len(state.complete),
        "missing": format_array_expression(state.missing), "queued": format_array_expression(queued),
        "failed": {str(i): reason for i, reason in sorted(state.failed.items())},
        "blocked_by": waiting.name if waiting is not None and not state.is_complete else None,
        "counts": state.totals().to_json(),
        **({"per_second": {state.phase.counts.RATE: round(rate, 1)}} if (rate := state.rate()) is not None else {}),
        **({"progress": state.progress} if state.progress else {}),
    }


def collect_status(layout: CheckpointLayout, plan_of: Callable[[RunConfig], list[PlannedPhase]],
                   keep_manifests: bool = False, request_id: str | None = None) -> RunStatus:
    """What the checkpoint says; ``keep_manifests`` also returns every complete shard's manifest.

    ``plan_of`` gives the run's phases (the phase registry's, which the caller knows). The
    options shown are those of ``request_id`` (the latest submission's, which the caller
    knows), else those the run's first start pinned.
    """
    run = read_run_config(layout)
    request_id = request_id or run.request
    options = PinnedRequest.read(layout, request_id).options if request_id else {}
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
        submitted=layout.submissions_file.is_file(),
        amendments=read_amendments(layout),
        checkpoint=layout.root,
        shards=run.shards,
        source_task_count=run.source_task_count,
        phases=phase_states(layout, run, plan_of(run), scan),
        failed_attempts=failed,
        duration_s=duration_summary,
        manifests=scan.manifests,
        request_id=request_id,
        options=options,
        partial=partial_shards(layout, set(manifests)),
        resumed_tasks=scan.resumed_tasks,
        stage_times=sorted(scan.stage_times.values(), key=lambda t: t.node),
        busy=(scan.busy_cpu_s, scan.busy_wall_s),
    )


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


def shard_states(status: RunStatus) -> dict[str, list[int]]:
    """Every shard in one state: complete, running, pending, failed (an attempt failed and
    nothing of it is queued), or waiting (not started, or stopped without a record)."""
    failed_shards = {a.shard_index for a in status.failed_attempts if not a.shard_completed_later}
    complete = set(status.completed)
    states: dict[str, list[int]] = {"complete": [], "running": [], "pending": [], "failed": [], "waiting": []}
    for shard in status.shards:
        queued = status.shards_queued.get(shard)
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

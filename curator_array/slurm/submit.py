"""Submitting a logical run (or its retries) as one or more ``sbatch --array`` windows.

Each window carries the run's ``TOTAL_SHARDS`` and ``MINIMUM_SHARD_INDEX`` and its own
``SHARD_INDEX_OFFSET``, exactly as the spec's submit script expects. Every submission is
recorded in the checkpoint (``submissions.jsonl``) so that ``status`` can show what is
still queued and ``retry --submit`` can refuse to resubmit shards that are still running.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..core.errors import ConfigError
from ..core.layout import CheckpointLayout
from ..core.records.base import RecordError
from ..core.records.submission import SubmissionRecord
from ..core.sharding import ShardRange
from .commands import SlurmCommandError, max_array_size, slurm_command, submit

ACTIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")


@dataclass(frozen=True)
class Submission:
    """One ``sbatch --array`` window of a site script.

    ``script_args`` go to the script (and on to every element); ``variables`` are set in
    the job's environment besides the shard variables; ``request`` is the id of the run
    options pinned for these elements, recorded with the job; ``phase`` names the phase
    of its elements (None: the first phase, the spec's shards).
    """

    array_expression: str
    offset: int
    shards: ShardRange
    script: str
    script_args: tuple[str, ...] = ()
    parallel: int | None = None
    variables: tuple[tuple[str, str], ...] = ()
    request: str | None = None
    phase: str | None = None
    after: tuple[str, ...] = ()  # job ids this window waits for (``--dependency=afterany``)

    @property
    def env(self) -> dict[str, str]:
        return {
            **dict(self.variables),
            "TOTAL_SHARDS": str(self.shards.total),
            "SHARD_INDEX_OFFSET": str(self.offset),
            "MINIMUM_SHARD_INDEX": str(self.shards.minimum),
        }

    @property
    def sbatch_args(self) -> list[str]:
        throttle = f"%{self.parallel}" if self.parallel else ""
        waits = [f"--dependency=afterany:{':'.join(self.after)}"] if self.after else []
        return [f"--array={self.array_expression}{throttle}", *waits]

    def command_line(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        args = " ".join(shlex.quote(a) for a in [*self.sbatch_args, self.script, *self.script_args])
        return f"{env} sbatch --parsable {args}"


def resolve_max_array_size(value: str | None, env: Mapping[str, str], default: str | None = None) -> int | None:
    """``auto`` asks the cluster (``scontrol show config``), ``none`` means no limit, else a number.

    Submitting commands default to ``auto``: a window whose indices exceed the cluster's
    ``MaxArraySize`` is refused by sbatch, so nobody should need to know the flag.
    """
    value = default if value is None else value
    if value is None or value.strip().lower() == "none":
        return None
    if value.strip().lower() == "auto":
        return max_array_size(env)
    try:
        size = int(value)
    except ValueError:
        raise ConfigError(f"--max-array-size {value!r}: use a number, 'auto' or 'none'") from None
    if size < 1:
        raise ConfigError(f"--max-array-size must be at least 1, got {size}")
    return size


def plan_submissions(
    wanted: Sequence[int], shards: ShardRange, script: str,
    max_size: int | None = None, parallel: int | None = None, script_args: Sequence[str] = (),
    variables: Mapping[str, str] | None = None, request: str | None = None, phase: str | None = None,
) -> list[Submission]:
    """The windows of one phase; the elements of a phase after the first are told it (``--phase``)."""
    args = tuple(script_args) + (("--phase", phase) if phase is not None else ())
    return [
        Submission(w.array_expression, w.shard_index_offset, shards, script, args, parallel,
                   tuple(sorted((variables or {}).items())), request, phase)
        for w in shards.windows(wanted, max_size)
    ]


def chained(groups: Sequence[Sequence[Submission]], job_ids: Sequence[Sequence[str]] | None = None) -> list[Submission]:
    """The windows of every phase, each phase waiting for the one before (``afterany``: it
    starts whether that one succeeded or not, checks its inputs and exits 2 at once if they
    are incomplete, so no phase is left waiting forever on a failed one).

    Without ``job_ids`` (a dry run) the waits name the phase they wait for.
    """
    planned, before = [], ()
    for number, group in enumerate(groups):
        for item in group:
            planned.append(replace(item, after=tuple(before)))
        if group:
            before = tuple(job_ids[number]) if job_ids else (f"<{group[0].phase or 'shard'} jobs>",)
    return planned


def submit_all(submissions: Sequence[Submission], layout: CheckpointLayout, env: Mapping[str, str]) -> list[str]:
    """sbatch every window; record each job id as soon as it exists."""
    job_ids = []
    for item in submissions:
        job_id = submit(item.script, item.sbatch_args, env={**env, **item.env}, script_args=item.script_args)
        record_submission(layout, job_id, item)
        job_ids.append(job_id)
    return job_ids


def submit_phases(groups: Sequence[Sequence[Submission]], layout: CheckpointLayout,
                  env: Mapping[str, str]) -> list[tuple[str, Submission]]:
    """sbatch each phase's windows after the previous phase's jobs (see ``chained``)."""
    done: list[tuple[str, Submission]] = []
    before: tuple[str, ...] = ()
    for group in groups:
        waiting = [replace(item, after=before) for item in group]
        ids = submit_all(waiting, layout, env)
        done += zip(ids, waiting)
        if ids:
            before = tuple(ids)
    return done


def record_submission(layout: CheckpointLayout, job_id: str, item: Submission) -> None:
    layout.metadata_dir.mkdir(parents=True, exist_ok=True)
    record = SubmissionRecord(job_id, item.array_expression, item.offset, item.shards, item.request, item.phase,
                              time.time())
    fd = os.open(layout.submissions_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record.to_json()) + "\n").encode())
    finally:
        os.close(fd)


def recorded_submissions(layout: CheckpointLayout) -> list[SubmissionRecord]:
    path = layout.submissions_file
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(SubmissionRecord.from_json(json.loads(line)))
        except (ValueError, RecordError):  # a torn last line of a killed submit
            continue
    return records


def cancel_pending_windows(layout: CheckpointLayout, phase: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Cancel the elements of ``phase``'s recorded windows that are still pending; returns
    their jobs. Called once the phase is complete: a phase of steps queues more windows than
    most runs need, and on a busy cluster each would wait its turn in the queue only to find
    nothing to do while the next phase waits behind it. Running elements are never touched."""
    jobs = [r.job_id for r in recorded_submissions(layout) if r.phase == phase]
    if not jobs:
        return []
    out = slurm_command(["squeue", "-h", "-t", "PENDING", "-j", ",".join(jobs), "-o", "%F"], env)
    pending = sorted(set(out.split()) & set(jobs), key=int)
    if pending:
        slurm_command(["scancel", "--state=PENDING", *pending], env)
    return pending


def latest_request(layout: CheckpointLayout) -> str | None:
    """The id of the run options the latest submission pinned (None before any)."""
    requests = [r.request for r in recorded_submissions(layout) if r.request is not None]
    return requests[-1] if requests else None


def queued_phase_elements(layout: CheckpointLayout,
                          env: Mapping[str, str] | None = None) -> dict[str | None, dict[int, str]]:
    """Phase → element → SLURM state, for elements of recorded submissions still in the
    queue, by the phase the submission names (None: the first phase, ``Phase.submitted_name``)."""
    records = recorded_submissions(layout)
    if not records:
        return {}
    offsets = {r.job_id: r.offset for r in records}
    phases = {r.job_id: r.phase for r in records}
    try:
        out = slurm_command(["squeue", "-h", "-r", "-j", ",".join(offsets), "-o", "%i %T"], env)
    except SlurmCommandError:
        return {}
    states: dict[str | None, dict[int, str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 2 or "_" not in parts[0]:
            continue
        job, _, index = parts[0].partition("_")
        if job in offsets and index.isdigit() and parts[1] in ACTIVE_STATES:
            states.setdefault(phases[job], {})[int(index) + offsets[job]] = parts[1]
    return states

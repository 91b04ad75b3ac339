"""What `curator-array run` does, between parsing flags and the exit code: one element of
one phase of the run.

The entrypoint and the ``run`` command both end here, with the job context already
resolved. Without ``--phase`` the element is a shard of the first phase; outside an array,
a run then goes on with every element of the later phases whose inputs are complete, so a
workstation run finishes the whole chain with its last shard. With ``--phase`` it is one
element of that phase (file work on node 0, without Ray; other nodes have nothing to do).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.phase import Phase
from ..core.sharding import ShardConfig
from ..slurm.job_context import JobContext
from .lifecycle import PhaseContext, open_run, run_element, run_phase, run_ready_phases
from .phases import PHASES
from .request import RunRequest
from .shard import ShardStart, serve_worker_node
from .stopping import StopController

logger = logging.getLogger(__name__)


def run_element_command(request: RunRequest, context: JobContext, client_factory: Callable | None = None,
                        stop: StopController | None = None) -> int:
    """Run this process's element (or, on a node that only lends its Ray node, serve it); returns the exit code.

    ``stop`` is the run's stop controller when the caller installed one (the ``run``
    command does); ``client_factory`` replaces the Ray client the request asks for.
    """
    phase = PHASES.get(request.phase) if request.phase else PHASES.root
    job = context.job
    if not phase.is_root:
        return _later_phase_element(request, context, phase, stop)
    if request.cluster == "slurm" and not job.is_driver:
        return serve_worker_node(request, job)
    shard = context.shard or ShardConfig.single()
    PHASES.check(request.options.phase_settings, shard.range)  # refused before any work, not at its phase
    plan = PHASES.plan(request.options.phase_settings, shard.range)
    code = phase.work(ShardStart(request, context, stop, client_factory), shard.shard_index).exit_code
    if code == 0 and request.phase is None and job.array_task_id is None and len(plan) > 1:
        _continue_with_later_phases(request, context, stop)
    return code


def _phase_context(request: RunRequest, context: JobContext, stop: StopController | None) -> PhaseContext:
    run = open_run(request)
    return PhaseContext(request, run, PHASES.plan_of(run), context.job,
                        stop.raise_if_requested if stop is not None else lambda: None)


def _later_phase_element(request: RunRequest, context: JobContext, phase: Phase, stop: StopController | None) -> int:
    if request.cluster == "slurm" and not context.job.is_driver:
        return 0
    phases = _phase_context(request, context, stop)
    if context.shard is not None:
        run_element(phases, phase, context.shard.shard_index, request.force)
        return 0
    run_phase(phases, phase, request.force, wait=False)
    return 0


def _continue_with_later_phases(request: RunRequest, context: JobContext, stop: StopController | None) -> None:
    phases = _phase_context(request, context, stop)
    waiting = run_ready_phases(phases)
    if waiting:
        logger.info("later phases: %s (run the remaining shards; curator-array status --checkpoint-path %s)",
                    waiting, request.layout.root)
    else:
        logger.info("later phases complete: %s", ", ".join(p.name for p in phases.plan[1:]))

"""What `curator-array run` does, between parsing flags and the exit code: one element of
one phase of the run.

The entrypoint and the ``run`` command both end here, with the job context already
resolved. Without ``--phase`` the element is a shard of the first phase: a Ray cluster of
its own, and the spec's records. Outside an array, a run then goes on with every element of
the later phases whose inputs are complete, so a workstation run finishes the whole chain
with its last shard. With ``--phase`` it is one element of that phase (file work on node 0,
without Ray; other nodes have nothing to do).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace

from ..core.phase import Phase
from ..core.sharding import ShardConfig
from ..execution.slurm_client import Rendezvous
from ..slurm.commands import SlurmCommandError
from ..slurm.job_context import JobContext
from ..slurm.submit import cancel_pending_windows
from .lifecycle import PhaseContext, run_element, run_phase, run_ready_phases
from .phases import PHASES
from .request import RunRequest
from .shard import serve_worker_node
from .stopping import StopController

logger = logging.getLogger(__name__)


def number_this_node(request: RunRequest, context: JobContext) -> JobContext:
    """The context with this process's node index, taken in the rendezvous directory when the
    job's runtime did not say it (see ``Rendezvous.claim_node``)."""
    job = context.job
    if job.node_known:
        return context
    rendezvous = Rendezvous.for_job(request.rendezvous_root, job)
    index = rendezvous.claim_node(job.num_nodes, {"hostname": job.hostname, "pid": os.getpid()})
    logger.info("this is node %d of %d (%s), numbered in %s: its runtime passes no SLURM_NODEID", index,
                job.num_nodes, "head + driver" if index == 0 else "worker", rendezvous.directory)
    return replace(context, job=job.on_node(index))


def run_element_command(request: RunRequest, job_context: JobContext, client_factory: Callable | None = None,
                        stop: StopController | None = None) -> int:
    """Run this process's element (or, on a node that only lends its Ray node, serve it); returns the exit code.

    ``stop`` is the run's stop controller when the caller installed one (the ``run``
    command does); ``client_factory`` replaces the Ray client the request asks for.
    """
    context = PhaseContext(request, job_context, PHASES, stop, client_factory)
    if request.phase is None or PHASES.get(request.phase) is PHASES.root:
        return _curation_shard(context)
    if request.cluster == "slurm" and not job_context.job.is_driver:
        return 0
    phase = PHASES.get(request.phase)
    if job_context.shard is not None:
        run_element(context, phase, job_context.shard.shard_index, request.force)
        if phase.passes > 1 and not request.force:  # forced windows are the user's to keep
            release_unused_windows(context, phase)
    else:
        run_phase(context, phase, request.force, wait=False)
    return 0


def release_unused_windows(context: PhaseContext, phase: Phase) -> None:
    """Once every element of a phase of steps is complete, its windows still queued are
    cancelled (``cancel_pending_windows``), so the next phase starts now. Where SLURM's tools
    are not at hand (a container without them) they start later and end at once, as before."""
    if len(context.complete(phase, refresh=True)) < len(context.elements(phase.name)):
        return
    try:
        cancelled = cancel_pending_windows(context.layout, phase.name)
    except SlurmCommandError as exc:
        logger.info("%s is complete; its later windows will find nothing to do (%s)", phase.name, exc)
        return
    if cancelled:
        logger.info("%s is complete: cancelled its windows still queued (jobs %s)", phase.name, ", ".join(cancelled))


def _curation_shard(context: PhaseContext) -> int:
    """A shard of the first phase; outside an array, then every later element that is ready."""
    request, job = context.request, context.job
    if request.cluster == "slurm" and not job.is_driver:
        return serve_worker_node(request, job)
    shard = context.job_context.shard or ShardConfig.single()
    PHASES.check(request.options.phases, shard.range)  # refused before any work, not at its phase
    code = PHASES.root.work(context, shard.shard_index).exit_code
    if code == 0 and request.phase is None and job.array_task_id is None and len(PHASES.plan(
            request.options.phases, shard.range)) > 1:
        waiting = run_ready_phases(context)
        if waiting:
            logger.info("later phases: %s (run the remaining shards; curator-array status --checkpoint-path %s)",
                        waiting, request.layout.root)
        else:
            logger.info("later phases complete: %s", ", ".join(p.name for p in context.plan[1:]))
    return code

"""One shard of the curation phase, the work of its element (``phases.curation``).

On node 0 (or the only node) the sequence is: launch the cluster, prepare the shard, start
the cluster and run it, record the outcome, stop. Every way out (nothing to do, a refused
start, a failure, success) leaves through one ``with`` block that stops the cluster. The
other nodes of a multi-node element only lend their Ray node (``serve_worker_node``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import CheckpointMismatchError, ConfigError, CuratorArrayError
from ..core.layout import ATTEMPT_ERROR_FILE, AttemptId, CheckpointLayout
from ..core.records.attempt import AttemptRecord
from ..core.run_contract import archive_run
from ..core.sharding import ShardConfig
from ..execution.clients import RayClient, RayClusterClient
from ..execution.slurm_client import SlurmRayClient, SlurmWorkerNode
from ..pipelines.options import DOWNLOADS_DIR
from ..slurm.job_context import JobContext
from ..slurm.jobenv import JobEnvironment
from . import startup_log
from .request import RunRequest
from .stopping import ShardStopped, StopController
from .supervisor import announce_attempt
from .timeline import Timeline

if TYPE_CHECKING:  # the heavy modules (pyarrow, Ray Data) are imported after the head is launched
    from ..pipelines.pipeline import Pipeline
    from .lifecycle import PhaseContext
    from .prepare import PreparedShard
    from .runner import ShardOutcome

logger = logging.getLogger(__name__)

# What a reader's failure says of a record it cannot parse (formats.jsonl and the other readers).
MALFORMED = "malformed"
# How often the driver asks Ray whether a node died: one GCS call each time.
NODE_CHECK_INTERVAL_S = 1.0


def make_client(request: RunRequest, job: JobEnvironment, stop: StopController | None = None) -> RayClusterClient:
    """The driver's Ray client: a private head on this node, or one cluster over the job's nodes."""
    on_connect = stop.reclaim if stop is not None else None
    if request.cluster == "slurm":
        return SlurmRayClient(
            job, request.rendezvous_root, node_options=request.node_options(job),
            temp_root=request.ray_temp_dir, join_timeout_s=request.worker_join_timeout, node_ip=request.node_ip,
            on_connect=on_connect,
        )
    return RayClient(address=request.ray_address, node_options=request.node_options(job), temp_root=request.ray_temp_dir,
                     on_connect=on_connect)


def serve_worker_node(request: RunRequest, job: JobEnvironment) -> int:
    """A node other than 0 of a multi-node element: lend this node's Ray node until the driver is done."""
    return SlurmWorkerNode(
        job, request.rendezvous_root, node_options=request.node_options(job),
        temp_root=request.ray_temp_dir, join_timeout_s=request.worker_join_timeout, node_ip=request.node_ip,
    ).run()


def run_curation_shard(start: PhaseContext) -> ShardOutcome | None:
    """Run this process's shard (node 0 of its job drives) on a Ray cluster of its own and
    record the outcome; None when the shard was already complete."""
    request, context, stop = start.request, start.job_context, start.stop
    job = context.job
    timeline = Timeline()
    client = start.client_factory() if start.client_factory else make_client(request, job, stop)
    layout = request.layout
    errors = _AttemptErrors(layout, context.shard or ShardConfig.single(), job.attempt_id(), job)
    prepared: PreparedShard | None = None
    try:
        with stop.on_stop(errors.record) if stop is not None else nullcontext(), _cluster_lifetime(client):
            timeline.mark("head_launched")
            prepared = _prepare(request, layout, context, start.registry)  # a refused start says one line, and only that
            startup_log.release()
            logger.info(context.describe_shard())
            timeline.mark("prepared")
            if prepared.already_complete:
                logger.info("shard %d is already complete (%s); nothing to do (--force reruns it)",
                            prepared.shard.shard_index, prepared.layout.manifest_path(prepared.shard.shard_index))
                return None
            outcome = _run(request, prepared, client, job, stop, timeline, errors)
    except ShardStopped:
        if prepared is not None and prepared.tasks:
            _say_what_is_on_record(prepared)
        raise
    log_outcome(outcome, job.array_task_id is not None, str(request.checkpoint))
    return outcome


def _say_what_is_on_record(prepared: PreparedShard) -> None:
    """After a stop, once the cluster is down (no worker records a task any more): what a
    rerun keeps, as ``status`` will count it."""
    from ..core.task_records import count_done

    recorded, total = count_done(prepared.layout, prepared.shard.shard_index)[0], prepared.shard_tasks
    logger.info("stopped: %d/%d tasks of shard %d on record; a rerun runs only the other %d", recorded, total,
                prepared.shard.shard_index, total - recorded)


@contextmanager
def _cluster_lifetime(client: RayClusterClient) -> Iterator[None]:
    """Launch now; on every way out stop whatever was launched or started.

    Ray's logs are kept after an error of a cluster that was started; a head launched for a
    shard that never needed it (complete, empty, or refused) leaves nothing behind.
    """
    client.launch()
    try:
        yield
    except BaseException:
        client.stop(keep_logs=client.started)
        raise
    client.stop()


def _run(request: RunRequest, prepared: PreparedShard, client: RayClusterClient, job: JobEnvironment,
         stop: StopController | None, timeline: Timeline, errors: _AttemptErrors) -> ShardOutcome:
    from ..execution.ray_data import RayDataExecutor, describe_cluster
    from .runner import run_prepared

    attempt = errors.attempt  # one attempt id for its records, whenever they are written
    profile_dir = str(prepared.layout.profile_dir(attempt, prepared.shard.shard_index)) if request.profile else None
    executor = RayDataExecutor(stall_timeout_s=request.stall_timeout, progress_bars=request.progress,
                               profile_dir=profile_dir)
    if not prepared.tasks:  # a manifest with 0 tasks, and no cluster to wait for
        return run_prepared(prepared, executor.execute, job, attempt, output_dir=request.options.written_dir)
    with errors.recording():
        start_cluster(client, stop)
        timeline.mark("ray_ready")
        return run_prepared(
            prepared, executor.execute, job, attempt, describe_cluster, request.options.written_dir,
            health_check=_health_check(client, stop), timeline=timeline,
            progress_interval_s=request.progress_interval,
        )


def start_cluster(client: RayClusterClient, stop: StopController | None) -> None:
    """Start the cluster; then stop if a stop came meanwhile.

    A stop signal that lands while Ray starts raises inside Ray's code, which may swallow
    it (the stop is recorded all the same), and the next check after a result may be
    minutes away when tasks are long: the run would go on until SLURM kills it.
    """
    client.start()
    if stop is not None:
        stop.raise_if_requested()


def _health_check(client: RayClusterClient, stop: StopController | None) -> Callable[[], None]:
    """Called after every result: a stop request, or a node lost (looked up at most once a second)."""
    next_look = 0.0

    def check() -> None:
        nonlocal next_look
        if stop is not None:
            stop.raise_if_requested()
        if time.monotonic() < next_look:
            return
        next_look = time.monotonic() + NODE_CHECK_INTERVAL_S
        lost = client.lost_nodes()
        if lost:
            raise CuratorArrayError(
                f"{lost} Ray node(s) of this job died during the run: the attempt is incomplete and no "
                f"completion manifest is written. {rerun_advice(in_array=True)}"
            )

    return check


def log_outcome(outcome: ShardOutcome, in_array: bool, checkpoint: str = "<path>") -> None:
    work = outcome.work
    if outcome.status == "completed":
        logger.info(
            "shard %d complete: %d tasks, %d rows in, %d rows out; manifest %s",
            outcome.shard.shard_index, work.counts.source_tasks, work.counts.rows_in, work.counts.rows_out, outcome.manifest_path,
        )
    else:
        logger.error(
            "shard %d incomplete: %d task(s) failed, listed in %s; no manifest written. %s",
            outcome.shard.shard_index, len(outcome.failures), outcome.failed_tasks_path,
            rerun_advice(in_array, checkpoint, input_fixed=any(MALFORMED in f.reason for f in outcome.failures)),
        )


def rerun_advice(in_array: bool, checkpoint: str = "<path>", input_fixed: bool = False) -> str:
    """What to do after a failed attempt, where the attempt ran: an array element is resubmitted,
    a run outside an array is started again by hand. A fixed input file differs from the run's
    frozen listing, so its rerun needs ``--repair`` (said now, not at the next refusal)."""
    if input_fixed:
        if in_array:
            return (f"Fix the file, then resubmit with --repair (a fixed file differs from the run's listing): "
                    f"curator-array retry --checkpoint-path {checkpoint} --submit --site <site> -- --repair; "
                    "or skip bad records with --malformed skip")
        return ("Fix the file and run the same command again with --repair (a fixed file differs from the run's "
                "listing), or skip bad records with --malformed skip: finished tasks are kept")
    if in_array:
        return f"Resubmit what is missing: curator-array retry --checkpoint-path {checkpoint} --submit --site <site>"
    return "Fix the cause and run the same command again: finished tasks are kept"


def _whole_run(context: JobContext) -> bool:
    """Whether this start runs the whole run (one shard, or none): only then does it compare the
    input tree with the frozen listing. An element of many shards never walks the input (at 2,000
    elements that is the metadata storm the frozen listing prevents); submit and --relist compare."""
    return context.shard is None or context.shard.total_shards == 1


def _prepare(request: RunRequest, layout: CheckpointLayout, context: JobContext, phases) -> PreparedShard:
    """Prepare the shard under the run contract; ``--new-run`` archives a run that differs."""
    if request.new_run and context.job.array_task_id is not None:
        raise ConfigError(
            "--new-run archives the checkpoint's run and must happen once, not in every array element: "
            "use `curator-array submit --new-run`, or run once outside the array"
        )
    from ..storage.s3 import ensure_reachable
    from .prepare import prepare_shard

    ensure_reachable(request.options.stores())  # a store that does not answer: refused in seconds
    whole_run = _whole_run(context)

    def prepared(fresh_run: bool) -> PreparedShard:
        """A whole run checks its inputs as a submission does; a run --new-run just archived has nothing to check."""
        checks = whole_run and not fresh_run
        pipeline = request.pipeline(phases, check_selection=checks and context.job.array_task_id is None)
        return prepare_shard(pipeline, layout, context.shard, request.force,
                             request.relist and not fresh_run, request.pinned, request.repair, compare_tree=checks)

    try:
        return prepared(fresh_run=False)
    except CheckpointMismatchError as exc:
        if not request.new_run:
            raise
        archive = archive_run(layout, Path(request.options.output_dir), kept=(DOWNLOADS_DIR,))
        logger.warning("a new logical run starts (%s); the previous run's records and outputs are in %s", exc,
                       archive)
    return prepared(fresh_run=True)


class _AttemptErrors:
    """Writes the attempt's ``attempt_error.json`` once, for the first error seen.

    A stop is recorded from the moment the cluster is launched, because SLURM may send the
    time-limit signal up to a minute early, while the shard is still being prepared; other
    errors only once the shard runs, since a refused start (a changed input list, a bad
    option) is the user's to fix, not an attempt to retry.
    """

    def __init__(self, layout: CheckpointLayout, shard: ShardConfig, attempt: AttemptId, job: JobEnvironment):
        self.layout, self.shard, self.attempt, self.job = layout, shard, attempt, job
        self.recorded = False
        announce_attempt(layout.attempt_dir(attempt, shard.shard_index) / ATTEMPT_ERROR_FILE,
                         AttemptRecord.of(attempt, shard, job.identity()))

    @contextmanager
    def recording(self) -> Iterator[None]:
        try:
            yield
        except BaseException as exc:
            self.record(exc)
            raise

    def record(self, error: BaseException) -> None:
        if self.recorded:
            return
        self.recorded = True
        shard = self.shard
        record = AttemptRecord.of(self.attempt, shard, self.job.identity(), error=error)
        try:
            path = record.write(self.layout, self.attempt)
        except OSError as exc:  # never let the record hide the error itself
            logger.warning("could not record why the attempt ended (%s)", exc)
        else:
            logger.error("attempt %s of shard %d ended early; reason recorded in %s", self.attempt, shard.shard_index, path)


def run_shard_here(
    pipeline: Pipeline,
    checkpoint_path: str,
    shard: ShardConfig | None = None,
    output_dir: str | None = None,
    executor=None,
    job: JobEnvironment | None = None,
    record_tasks: bool = True,
) -> ShardOutcome:
    """Run one shard on the Ray cluster this process is already connected to.

    For notebooks, tests and benchmarks: no client, no stop handlers, no exit codes; the
    same run contract, manifests, task and failed-task records as ``curator-array run``.
    """
    from ..execution.ray_data import RayDataExecutor, describe_cluster
    from .prepare import prepare_shard
    from .runner import run_prepared

    executor = executor or RayDataExecutor(progress_bars=False)
    job = job or JobEnvironment.from_env({})
    prepared = prepare_shard(pipeline, checkpoint_path, shard)
    return run_prepared(prepared, executor.execute, job, job.attempt_id(), describe_cluster, output_dir,
                        record_tasks=record_tasks)

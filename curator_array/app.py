"""What `curator-array run` does, between parsing flags and exit codes.

Kept out of ``cli.py`` so the entrypoint (which picks a different Ray client on several
nodes) reuses exactly the same steps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from .checkpoint import AttemptId, CheckpointLayout, write_attempt_error
from .errors import CheckpointMismatchError, ConfigError
from .job_context import JobContext
from .jobenv import JobEnvironment
from .options import DOWNLOAD_SLOT, PipelineOptions
from .ray_cluster import NodeOptions
from .run_config import archive_run
from .sharding import ShardConfig
from .stopping import StopController
from .timeline import Timeline

if TYPE_CHECKING:  # the heavy modules (pyarrow, Ray Data) are imported after the head is launched
    from .pipeline import Pipeline
    from .runner import ShardOutcome

logger = logging.getLogger(__name__)


@dataclass
class RunRequest:
    """What to run (``options``) and how: checkpoint, pipeline, Ray and multi-node settings."""

    options: PipelineOptions
    checkpoint_path: str | None = None
    pipeline_ref: str | None = None
    force: bool = False
    new_run: bool = False
    relist: bool = False
    ray_address: str | None = None
    num_cpus: int | None = None
    object_store_memory: int | None = None
    ray_temp_dir: str | None = None
    stall_timeout: float | None = None
    progress: bool | None = None
    progress_interval: float = 30.0
    cluster: str = "local"
    rendezvous_dir: str | None = None
    worker_join_timeout: float = 300.0
    node_ip: str | None = None

    @classmethod
    def from_flags(cls, flags: Mapping[str, object]) -> RunRequest:
        """Split the flat ``run`` flags into pipeline options and run settings."""
        names = {f.name for f in fields(PipelineOptions)}
        options = {k: v for k, v in flags.items() if k in names}
        options["input_dir"] = options.get("input_dir") or ""
        options["input_urls"] = tuple(options.get("input_urls") or ())
        return cls(PipelineOptions(**options), **{k: v for k, v in flags.items() if k not in names})

    @property
    def checkpoint(self) -> str:
        return self.checkpoint_path or self.options.output_dir

    def build_pipeline(self) -> Pipeline:
        from .pipeline import default_pipeline, load_pipeline

        if self.pipeline_ref:
            return load_pipeline(self.pipeline_ref, self.options)
        return default_pipeline(self.options)

    def node_options(self, job: JobEnvironment) -> NodeOptions:
        return NodeOptions(
            num_cpus=self.num_cpus or job.cpus_on_node or job.cpus_per_task,
            num_gpus=job.gpus_on_node,
            object_store_memory=self.object_store_memory,
            job_memory_mb=job.mem_per_node_mb,
            # Download slots make the per-node download cap hard on clusters we start.
            custom_resources={DOWNLOAD_SLOT: float(max(1, math.ceil(self.options.download_workers_per_node)))},
        )


def report(outcome: ShardOutcome) -> None:
    stats = outcome.stats
    if outcome.status == "completed":
        logger.info(
            "shard %d complete: %d tasks, %d rows in, %d rows out; manifest %s",
            outcome.shard.shard_index, stats["source_tasks"], stats["rows_in"], stats["rows_out"], outcome.manifest_path,
        )
    else:
        logger.error(
            "shard %d incomplete: %d task(s) failed, listed in %s; no manifest written, rerun the shard "
            "(curator-array retry)",
            outcome.shard.shard_index, len(outcome.failures), outcome.failed_tasks_path,
        )


def make_client(request: RunRequest, job: JobEnvironment, stop: StopController | None = None):
    """The Ray client the entrypoint chose: one node (RayClient) or the job's nodes."""
    from .clients import RayClient
    from .slurm_client import SlurmRayClient

    on_connect = stop.reclaim if stop is not None else None
    if request.cluster == "slurm":
        root = request.rendezvous_dir or CheckpointLayout(request.checkpoint).metadata_dir / ".ray_rendezvous"
        return SlurmRayClient(
            job, root, node_options=request.node_options(job), temp_root=request.ray_temp_dir,
            join_timeout_s=request.worker_join_timeout, node_ip=request.node_ip, on_connect=on_connect,
        )
    return RayClient(address=request.ray_address, node_options=request.node_options(job), temp_root=request.ray_temp_dir,
                     on_connect=on_connect)


def run_shard_command(
    request: RunRequest, context: JobContext, client_factory=None, stop: StopController | None = None
) -> int:
    """Run one shard (or, on a non-driver node of a multi-node job, serve it); the exit code.

    On several nodes every node runs this same command: node 0 is the driver, the others
    only contribute their Ray node and return when the driver is done. ``stop`` is the
    run's stop controller when the caller installed one (the ``run`` command does).
    """
    timeline = Timeline()
    job = context.job
    client = client_factory() if client_factory else make_client(request, job, stop)
    if request.cluster == "slurm" and not job.is_driver:
        return client.run_worker()
    if request.cluster == "local" and hasattr(client, "launch"):
        client.launch()  # boots while Ray Data is imported and the shard prepared
        timeline.mark("head_launched")
    try:
        from .ray_data import RayDataExecutor, describe_cluster
        from .runner import run_prepared

        logger.info(context.describe_shard())
        prepared = _prepare(request, context)
        timeline.mark("prepared")
    except BaseException:
        client.finish("failed")
        _stop_unused(client)
        raise
    if prepared.already_complete or not prepared.tasks:
        client.finish("ok")
        _stop_unused(client)
    if prepared.already_complete:
        logger.info(
            "shard %d is already complete (%s); nothing to do (--force reruns it)",
            prepared.shard.shard_index, prepared.layout.manifest_path(prepared.shard.shard_index),
        )
        return 0
    attempt = AttemptId.from_job(job)
    executor = RayDataExecutor(stall_timeout_s=request.stall_timeout, progress_bars=request.progress)
    if not prepared.tasks:
        outcome = run_prepared(prepared, executor.execute, job, attempt, output_dir=request.options.output_dir)
    else:
        lost_nodes = getattr(client, "lost_nodes", None)

        def health_check() -> None:
            if stop is not None:
                stop.raise_if_requested()
            if lost_nodes is not None:
                _check_nodes(lost_nodes)

        errors = _AttemptErrors(prepared, attempt, job)
        record_on_stop = stop.on_stop(errors.record) if stop is not None else nullcontext()
        # The inner recording comes before the cluster's teardown, which can hang or be cut
        # short; the outer one catches a cluster that never started.
        with record_on_stop, errors.recording(), client, errors.recording():
            timeline.mark("ray_ready")
            outcome = run_prepared(
                prepared, executor.execute, job, attempt, describe_cluster, request.options.output_dir,
                health_check=health_check, timeline=timeline, progress_interval_s=request.progress_interval,
            )
    report(outcome)
    return outcome.exit_code


def _stop_unused(client) -> None:
    """A head launched early for a shard that needs none (complete, empty, or refused)."""
    if getattr(client, "head", None) is not None:
        client.stop()


def _prepare(request: RunRequest, context: JobContext):
    """Prepare the shard under the run contract; ``--new-run`` archives a run that differs."""
    if request.new_run and context.job.array_task_id is not None:
        raise ConfigError(
            "--new-run archives the checkpoint's run and must happen once, not in every array element: "
            "use `curator-array submit --new-run`, or run once outside the array"
        )
    from .prepare import prepare_shard

    pipeline = request.build_pipeline()
    try:
        return prepare_shard(pipeline, request.checkpoint, context.shard, request.force, request.relist)
    except CheckpointMismatchError as exc:
        if not request.new_run:
            raise
        archive = archive_run(CheckpointLayout(request.checkpoint))
        logger.warning("a new logical run starts (%s); the previous run's records are in %s", exc, archive)
    return prepare_shard(pipeline, request.checkpoint, context.shard, request.force)


class _AttemptErrors:
    """Writes the attempt's ``attempt_error.json`` once, for the first error seen."""

    def __init__(self, prepared, attempt: AttemptId, job: JobEnvironment):
        self.prepared, self.attempt, self.job = prepared, attempt, job
        self.recorded = False

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
        shard = self.prepared.shard
        try:
            path = write_attempt_error(self.prepared.layout, self.attempt, shard, self.job, error)
        except OSError as exc:  # never let the record hide the error itself
            logger.warning("could not record why the attempt ended (%s)", exc)
        else:
            logger.error("attempt %s of shard %d ended early; reason recorded in %s", self.attempt, shard.shard_index, path)


def _check_nodes(lost_nodes) -> None:
    from .errors import CuratorArrayError

    lost = lost_nodes()
    if lost:
        raise CuratorArrayError(
            f"{lost} Ray node(s) of this job died during the run: the attempt is incomplete and no "
            "completion manifest is written; rerun the shard (curator-array retry)"
        )


def run_shard_here(
    pipeline: Pipeline,
    checkpoint_path: str,
    shard: ShardConfig | None = None,
    output_dir: str | None = None,
    executor=None,
    job: JobEnvironment | None = None,
) -> ShardOutcome:
    """Run one shard on the Ray cluster this process is already connected to.

    For notebooks, tests and benchmarks: no client, no stop handlers, no exit codes; the
    same run contract, manifests and failed-task records as ``curator-array run``.
    """
    from .prepare import prepare_shard
    from .ray_data import RayDataExecutor, describe_cluster
    from .runner import run_prepared

    executor = executor or RayDataExecutor(progress_bars=False)
    job = job or JobEnvironment.from_env({})
    prepared = prepare_shard(pipeline, checkpoint_path, shard)
    return run_prepared(prepared, executor.execute, job, AttemptId.from_job(job), describe_cluster, output_dir)

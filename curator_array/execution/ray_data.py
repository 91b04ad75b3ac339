"""Execute a list of stages on Ray Data: each stage becomes one ``map_batches``.

Tasks travel as pickled bytes in a single column, so stages exchange arbitrary Python
task objects (tables included) without Ray Data trying to infer a schema. Results,
``FailedTask`` included, are read back at the driver from the dataset's output: nothing
depends on state or environment variables on the workers.
"""

from __future__ import annotations

import logging
import math
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import ray
import ray.data
from ray.data.context import (
    DEFAULT_DOWNSTREAM_CAPACITY_BACKPRESSURE_RATIO,
    DEFAULT_TARGET_MAX_BLOCK_SIZE,
)

from ..stages.apply import apply_chain, set_up
from ..stages.base import ProcessingStage, RayStageSpec
from ..stages.meter import UnmeteredCpu
from ..stages.tasks import INPUT_BYTES, Task
from .clients import drives_own_cluster
from .cutting import cut_tasks
from .pools import ClusterShape, PoolChoice, choose_pool
from .profiling import profiled
from .ray_internals import quiet_progress_notice, without_helper_actors

logger = logging.getLogger(__name__)

COLUMN = "task"
HANDED_AT = "handed_at"  # when the process before handed the task over (time.time())
# Outputs a bounded stage may have started but not seen consumed, per worker of its pool.
BACKLOG_PER_WORKER = 4
BUNDLE_BYTES = 64 << 20  # the most input one Ray task takes at once (tasks_per_block, inputs_per_task)


def _encode(tasks: Sequence[Task]) -> pa.Table:
    """A block of tasks a stage hands on, stamped with when it did."""
    return pa.table({COLUMN: pa.array([pickle.dumps(t, protocol=5) for t in tasks], type=pa.large_binary()),
                     HANDED_AT: pa.array([time.time()] * len(tasks), type=pa.float64())})


def _source_dataset(tasks: Sequence[Task], blocks: int) -> ray.data.Dataset:
    """The source tasks as a dataset of ``blocks`` blocks, built in this process.

    ``ray.data.from_arrow`` would run a Ray task per block only to read the block's metadata;
    ``from_items`` computes it here. Source tasks are not stamped (``HANDED_AT``): their wait
    is the shard's backlog, not a stall.
    """
    rows = [{COLUMN: pickle.dumps(t, protocol=5)} for t in tasks]
    return ray.data.from_items(rows, override_num_blocks=blocks)


def _decode(batch: pa.Table) -> list[Task]:
    return [pickle.loads(blob) for blob in batch.column(COLUMN).to_pylist()]


def _queued_s(batch: pa.Table) -> float:
    """How long this batch waited between the hand-over and now (at least 0: nodes' clocks differ)."""
    if HANDED_AT not in batch.column_names or batch.num_rows == 0:
        return 0.0
    return max(0.0, time.time() - min(batch.column(HANDED_AT).to_pylist()))


@ray.remote(num_cpus=0)
class BacklogBudget:
    """Tokens shared by a producer stage and its consumer: one per output the consumer has not picked up.

    Ray Data's own backpressure reacts to object-store bytes; a download stage emits tiny
    paths, so without this it can run arbitrarily far ahead of the expensive stage after it.
    """

    def __init__(self, capacity: int):
        import asyncio

        self.tokens = asyncio.Semaphore(capacity)
        self.held: set[str] = set()

    async def acquire(self, key: str) -> None:
        await self.tokens.acquire()
        self.held.add(key)

    async def release(self, key: str) -> None:
        if key in self.held:
            self.held.discard(key)
            self.tokens.release()


def _within_budgets(tasks: list[Task], take, give, work: Callable[[list[Task]], Iterator[Task]]) -> Iterator[Task]:
    """Run ``work`` on a batch between two backlog budgets.

    ``give`` (this stage consumes a bounded producer): its tokens go back as processing
    starts, so the producer may fetch the next input meanwhile. ``take`` (this stage is the
    bounded producer): one token per input is held until the consumer picks the output up,
    or returned at once if the work fails.
    """
    keys = [t.task_id for t in tasks]
    if give is not None:
        ray.get([give.release.remote(k) for k in keys])
    if take is not None:
        ray.get([take.acquire.remote(k) for k in keys])
    try:
        yield from work(tasks)
    except BaseException:
        if take is not None:
            ray.get([take.release.remote(k) for k in keys])
        raise


def _blocks(tasks: Iterator[Task]) -> Iterator[pa.Table]:
    """One block per finished task; after each, Arrow's allocator hands back what the task freed.

    It keeps freed memory for reuse otherwise: about 50 MiB per worker between tasks of
    the JSONL shard, counted against the node for the whole run.
    """
    for task in tasks:
        yield _encode([task])
        pa.default_memory_pool().release_unused()


def _task_chain_fn(stages: Sequence[ProcessingStage], take=None, give=None, profile_dir: str | None = None):
    """One Ray task function running several stages in turn, without pickling in between.

    It yields one block per output task as soon as the last stage produces it, so a stage
    that streams (a reader of a large file) never holds the whole file. ``take`` and
    ``give`` are backlog budgets (see :func:`_within_budgets`); ``profile_dir`` profiles
    the process (``--profile``).
    """

    def apply(batch: pa.Table) -> Iterator[pa.Table]:
        queued = _queued_s(batch)

        def run_chain(tasks: list[Task]) -> Iterator[Task]:
            return apply_chain(stages, tasks, queued, set_up(stages))

        with profiled(profile_dir):
            yield from _blocks(_within_budgets(_decode(batch), take, give, run_chain))

    apply.__name__ = apply.__qualname__ = "->".join(stage.stage_name for stage in stages)
    return apply


def _unsized(spec: RayStageSpec) -> bool:
    return (spec.num_workers is None and spec.num_workers_per_node is None and spec.scheduling_strategy is None
            and spec.per_node_slot is None)


def _chainable(segment: Sequence[ProcessingStage], stage: ProcessingStage) -> bool:
    """Whether ``stage`` runs in the same worker as ``segment``.

    Plain task stages with the same needs share one Ray task (Ray Data would fuse them
    anyway). They also join an unsized actor stage before them: its pool then does the
    whole rest of the chain in the process that holds its model, instead of handing every
    block through the object store to a second pool that competes for the same CPUs and
    starts workers of its own (Ray Data never fuses an actor operator with what follows).
    And an unsized actor stage joins the plain stages before it (a reader): with a pool of
    its own the reader's tasks need CPUs the model's actors hold, so the actors waited for
    input with a core idle; in one chain each actor reads, scores and writes its files, and
    the pool takes every core. One actor stage a segment.
    """
    head = segment[0]
    first, second = head.validate(), stage.validate()
    if not (_unsized(first) and _unsized(second)):
        return False
    if not head.resources.shares_workers_with(stage.resources) or head.batch_size != stage.batch_size:
        return False
    return not second.is_actor_stage or not any(s.validate().is_actor_stage for s in segment)


def chain_stages(stages: Sequence[ProcessingStage]) -> list[list[ProcessingStage]]:
    segments: list[list[ProcessingStage]] = []
    for stage in stages:
        if segments and _chainable(segments[-1], stage):
            segments[-1].append(stage)
        else:
            segments.append([stage])
    return segments


def lead(segment: Sequence[ProcessingStage]) -> ProcessingStage:
    """The stage whose needs a segment's workers are made for: its actor stage, else its first."""
    return next((stage for stage in segment if stage.validate().is_actor_stage), segment[0])


class _StageActor:
    """Holds an actor stage, and the plain stages chained after it, whose ``setup`` ran once.

    ``take`` and ``give`` are backlog budgets (see :func:`_within_budgets`); ``profile_dir``
    profiles the process (``--profile``).
    """

    def __init__(self, stages: Sequence[ProcessingStage], take=None, give=None, profile_dir: str | None = None):
        self.stages = list(stages)
        self.take, self.give, self.profile_dir = take, give, profile_dir
        name = lead(self.stages).stage_name
        self.setup_s = set_up(self.stages, started_for=name)  # charged to the first outputs
        self.unmetered = UnmeteredCpu(name, [stage.stage_name for stage in self.stages],
                                      set_up_cpu=sum(cpu for _, cpu in self.setup_s.values()))

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        queued = _queued_s(batch)
        setup_s, self.setup_s = self.setup_s, None
        with profiled(self.profile_dir):
            yield from _blocks(self.unmetered.charge(_within_budgets(
                _decode(batch), self.take, self.give, lambda tasks: apply_chain(self.stages, tasks, queued, setup_s))))


BLOCKS_PER_CPU = 4


def tasks_per_block(count: int, shape: ClusterShape, first: ProcessingStage, task_bytes: int | None = None) -> int:
    """Source tasks per input block: one Ray task of the first stage handles a block.

    Ray Data notices a finished task only at its scheduling tick (about 0.1 s), so with one
    short source task per Ray task the workers sit idle between tasks; a few per block hide
    that, while about 4 blocks per CPU keep the load even at the end (measured on 48 and
    200 files of a JSONL shard: 16 blocks per CPU cost 1.1–1.2 s more wall time). A block
    holds no more than ``BUNDLE_BYTES`` of input when the tasks' size is known (``task_bytes``,
    their mean): tasks of large files are long, and two of them in a block left one core
    idle for a whole file at the end (16 files of 62 MB on 2 CPUs). Sized or actor stages
    (downloads under a cap) keep one task per block: their pool size is the point.
    """
    spec = first.validate()
    if spec.is_actor_stage or spec.num_workers is not None or spec.num_workers_per_node is not None:
        return 1
    per_block = max(1, count // max(1, int(shape.total_cpus) * BLOCKS_PER_CPU))
    return min(per_block, max(1, BUNDLE_BYTES // task_bytes)) if task_bytes else per_block


def mean_task_bytes(tasks: Sequence[Task]) -> int | None:
    """The mean input size of source tasks, when the listing gave every one its size."""
    return _mean_bytes([task.metadata.get(INPUT_BYTES) for task in tasks])


def _mean_bytes(sizes: Sequence[int | None]) -> int | None:
    """The mean of ``sizes`` (at least 1), or None when one of them is unknown."""
    if not sizes or None in sizes:
        return None
    return max(1, sum(sizes) // len(sizes))


def inputs_per_task(producer: ProcessingStage, tasks: Sequence[Task], backlog: int, consumers: int) -> int:
    """How many of a bounded producer's outputs (one per Ray task: a capped download) one Ray
    task of the next stage takes.

    Ray Data notices a finished task only at its tick (about 0.1 s), and reading a 5 MB object
    takes less: one object per task left the readers of a 200-object shard idle most of the
    time (bench_s3). So inputs of known size are taken up to ``BUNDLE_BYTES`` at once, never
    more than each consumer's share of the producer's ``backlog`` (a bundle waits for outputs
    the producer may not yet make); inputs of unknown size (a crawl's WARCs, minutes each)
    stay one per task, so that none waits for another's download.
    """
    mean = _mean_bytes([producer.output_bytes(task) for task in tasks])
    if mean is None:
        return 1
    return max(1, min(backlog // max(1, consumers), BUNDLE_BYTES // mean))


def cluster_shape() -> ClusterShape:
    alive = [n for n in ray.nodes() if n.get("Alive")]
    head = next((n for n in alive if "node:__internal_head__" in n.get("Resources", {})), None)
    head_runs_workers = head is None or any(
        head["Resources"].get(key, 0) > 0 for key in ("CPU", "GPU")
    )
    total_cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in alive)
    working = [n for n in alive if n is not head or head_runs_workers]
    return ClusterShape(alive_nodes=len(alive), head_runs_workers=head_runs_workers, total_cpus=total_cpus,
                        node_memory=tuple(float(n.get("Resources", {}).get("memory", 0)) for n in working))


def describe_cluster() -> list[dict[str, Any]]:
    """Alive nodes as recorded in completion manifests."""
    return [
        {"node_id": n["NodeID"], "hostname": n.get("NodeManagerHostname"), "address": n.get("NodeManagerAddress")}
        for n in ray.nodes()
        if n.get("Alive")
    ]


class RayDataExecutor:
    """Runs stages on the Ray cluster this process is connected to.

    ``stall_timeout_s`` fails a run whose operators make no progress for that long (Ray
    Data's default is 30 minutes). Progress bars appear on a terminal, log lines otherwise.
    ``profile_dir`` gets a cProfile of every worker process (``profiling``).
    ``private_cluster`` says the cluster is one our client started for this run alone; by
    default, whether the cluster this process drives is one of our clients' (``clients.drives_own_cluster``).
    """

    def __init__(self, *, stall_timeout_s: float | None = None, progress_bars: bool | None = None,
                 profile_dir: str | None = None, private_cluster: bool | None = None):
        self.stall_timeout_s = stall_timeout_s
        self.private_cluster = private_cluster
        self.profile_dir = profile_dir
        self.progress_bars = sys.stderr.isatty() if progress_bars is None else progress_bars
        self.pool_choices: dict[str, PoolChoice] = {}

    def _configure_context(self, operators: int, streams: bool) -> None:
        """Ray Data's settings for one run of ``operators`` map steps (worker pools).

        Ray Data reserves a share of the cluster for each operator, so that none starves
        the others; a run of one operator has no others, and there the reservation only
        kept its second task waiting for the first result (0.6 s of a 400 MB JSONL shard
        on 2 CPUs, bench_pipeline). Its downstream-capacity backpressure holds an operator
        back while its outputs outweigh what the next one (for the last, the driver) has
        taken in; the driver takes each result as it arrives, yet with one operator the
        policy paused new inputs for up to 5 s at a time while an actor sat idle (16 files
        of 77 MB through a model, bench_selection), and the last files then queued on one
        actor. Between several operators it stays: there it keeps a fast stage from filling
        the object store ahead of a slow one.
        """
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = self.progress_bars
        if not self.progress_bars:
            quiet_progress_notice()
        context.op_resource_reservation_enabled = operators > 1
        context.downstream_capacity_backpressure_ratio = (
            DEFAULT_DOWNSTREAM_CAPACITY_BACKPRESSURE_RATIO if operators > 1 else None)
        # With a stage that emits tasks in parts, each part is a block of its own, handed on as it
        # is made: Ray Data would merge a worker's outputs into blocks of up to 128 MiB, and the
        # driver (its progress line) would hear of a WARC's parts only once the last was written.
        # Not for tasks read whole: a 400 MB JSONL shard took 20% longer with it.
        context.target_max_block_size = 1 if streams else DEFAULT_TARGET_MAX_BLOCK_SIZE
        if self.stall_timeout_s is not None:
            context.execution_no_progress_timeout_s = self.stall_timeout_s

    def _map_kwargs(self, stage: ProcessingStage, shape: ClusterShape, inputs: int) -> dict[str, Any]:
        spec = stage.validate()
        choice = choose_pool(spec, stage.resources.cpus, shape, inputs, stage.resources.memory_bytes)
        self.pool_choices[stage.stage_name] = choice
        kwargs: dict[str, Any] = {
            "batch_size": stage.batch_size,
            "batch_format": "pyarrow",
            "num_cpus": stage.resources.cpus,
        }
        if stage.resources.gpus:
            kwargs["num_gpus"] = stage.resources.gpus
        if stage.resources.memory_bytes:
            kwargs["memory"] = stage.resources.memory_bytes
        if choice.actor:
            in_flight = spec.max_tasks_in_flight_per_actor
            if choice.size is not None:
                kwargs["compute"] = ray.data.ActorPoolStrategy(size=choice.size, max_tasks_in_flight_per_actor=in_flight)
            else:
                # Ray Data grows a pool only past 175% use, which one input per actor never reaches.
                kwargs["compute"] = ray.data.ActorPoolStrategy(
                    min_size=choice.min_size, max_size=choice.max_size, initial_size=choice.initial_size,
                    max_tasks_in_flight_per_actor=max(in_flight, 2),
                )
        elif choice.size is not None:
            kwargs["compute"] = ray.data.TaskPoolStrategy(size=choice.size)
        placement = "SPREAD (Ray Data default)"
        if spec.scheduling_strategy is not None:
            kwargs["ray_remote_args"] = {"scheduling_strategy": spec.scheduling_strategy}
            placement = f"{spec.scheduling_strategy} (stage override)"
        slot_note = ""
        if spec.per_node_slot is not None:
            if ray.cluster_resources().get(spec.per_node_slot, 0) > 0:
                kwargs["resources"] = {spec.per_node_slot: 1}
                slot_note = f"; hard per-node cap via resource {spec.per_node_slot!r}"
            else:
                slot_note = f"; cluster has no {spec.per_node_slot!r} resource, global cap only"
        logger.info("stage %s: %s, placement %s%s", stage.stage_name, choice.describe(), placement, slot_note)
        return kwargs

    def execute(self, stages: Sequence[ProcessingStage], tasks: Sequence[Task]) -> Iterator[Task]:
        """Yield every task that leaves the last stage, in completion order.

        On a private cluster (``private_cluster``: one our client started, of fixed size),
        Ray Data runs without its autoscaling and stats actors (:mod:`.ray_internals.data`).
        """
        if not tasks:
            return
        private = drives_own_cluster() if self.private_cluster is None else self.private_cluster
        with without_helper_actors(private):
            yield from self._execute(stages, tasks)

    def _execute(self, stages: Sequence[ProcessingStage], tasks: Sequence[Task]) -> Iterator[Task]:
        shape = cluster_shape()
        cut = cut_tasks(stages, tasks, shape.total_cpus)
        segments = chain_stages(stages)
        self._configure_context(len(segments), any(getattr(stage, "streams", False) for stage in stages))
        # Parts of a cut file are each a block: the cut already sized them to keep every CPU busy to the end.
        per_block = 1 if len(cut) > len(tasks) else tasks_per_block(len(tasks), shape, lead(segments[0]),
                                                                    mean_task_bytes(tasks))
        tasks = cut
        blocks = math.ceil(len(tasks) / per_block)
        dataset = _source_dataset(tasks, blocks)
        pending_budget, producer, pending_budget_capacity = None, None, 0
        for segment in segments:
            head = lead(segment)
            spec = head.validate()
            kwargs = self._map_kwargs(head, shape, blocks)
            if producer is not None and not spec.is_actor_stage:
                kwargs["batch_size"] = inputs_per_task(producer, tasks, pending_budget_capacity,
                                                       max(1, int(shape.total_cpus / max(head.resources.cpus, 0.01))))
                if kwargs["batch_size"] > 1:
                    logger.info("stage %s: %d of %s's outputs per Ray task (small inputs)", head.stage_name,
                                kwargs["batch_size"], producer.stage_name)
            worker = "actor" if spec.is_actor_stage else "task"
            for chained in segment:
                if chained is not head:
                    logger.info("stage %s: runs in the same Ray %s as %s", chained.stage_name, worker, head.stage_name)
            give, pending_budget = pending_budget, None
            take = None
            choice = self.pool_choices[head.stage_name]
            producer, pending_budget_capacity = None, 0
            if spec.bound_backlog and choice.size:
                producer, pending_budget_capacity = head, BACKLOG_PER_WORKER * choice.size
                take = pending_budget = BacklogBudget.remote(BACKLOG_PER_WORKER * choice.size)
                logger.info("stage %s: at most %d outputs ahead of the next stage", head.stage_name,
                            BACKLOG_PER_WORKER * choice.size)
            if spec.is_actor_stage:
                actor_cls = type("->".join(stage.stage_name for stage in segment), (_StageActor,), {})
                kwargs["fn_constructor_kwargs"] = {"stages": segment, "take": take, "give": give,
                                                   "profile_dir": self.profile_dir}
                dataset = dataset.map_batches(actor_cls, **kwargs)
            else:
                dataset = dataset.map_batches(_task_chain_fn(segment, take, give, self.profile_dir), **kwargs)
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            results = _decode(batch)
            if pending_budget is not None:  # the bounded stage was the last one: the driver consumes
                for result in results:
                    pending_budget.release.remote(result.task_id)
            yield from results

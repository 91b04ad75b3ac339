"""Everything decided about a shard before Ray starts, so errors and skips cost no cluster.

The order is the heart of "correct by construction": the run's listing (frozen in the
checkpoint, or walked once) → validated ids → run.json created or checked (shard range,
listing, pipeline) → this shard's tasks → skip if the shard is already complete.

Sources that can freeze their listing (``FreezableSource``, as the file partitioning stage)
are walked only by the first start of a run; later starts read the frozen listing and stat
only their own files. Other sources list every time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..core.amendments import (
    INPUT,
    MALFORMED,
    RELIST,
    Amendment,
    write_amendment,
)
from ..core.arrays import format_array_expression
from ..core.checkpoint import manifest_exists, supersede_manifest
from ..core.errors import CheckpointMismatchError, ConfigError, CuratorArrayError
from ..core.fingerprint import PipelineFingerprint
from ..core.layout import CheckpointLayout
from ..core.records.run import PinnedRequest
from ..core.run_contract import (
    RunConfig,
    RunContract,
    check_run,
    ensure_run_config,
    pin_missing,
    read_run_config,
    repin_listing,
    unwritable,
)
from ..core.sharding import ShardConfig, ShardRange, validate_source_ids
from ..core.task_records import TaskRecord, read_shard_records, verify
from ..pipelines.pipeline import Pipeline
from ..stages import listing as listings
from ..stages.base import FreezableSource
from ..stages.listing import Listing
from ..stages.tasks import FailedTask, Task
from ..storage.places import OutputPlace

logger = logging.getLogger(__name__)


class SourceFailedError(CuratorArrayError):
    """A source stage produced a FailedTask, which has no stable identity to retry."""


@dataclass
class PreparedShard:
    pipeline: Pipeline
    shard: ShardConfig
    layout: CheckpointLayout
    run: RunConfig
    tasks: list[Task]
    already_complete: bool
    total_source_tasks: int
    input_bytes: int | None = None  # this shard's input, when the listing knows it
    done: dict[str, TaskRecord] = field(default_factory=dict)  # finished by earlier attempts, verified
    inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # each task's input files, by task id

    @property
    def shard_tasks(self) -> int:
        """Every task of the shard: those left to run and those earlier attempts finished."""
        return len(self.tasks) + len(self.done)


def output_root(pipeline: Pipeline) -> str:
    """Where the pipeline's writer puts its files (what task records are relative to)."""
    return pipeline.writer.output_dir


def finished_earlier(layout: CheckpointLayout, shard: ShardConfig, run: RunConfig, pipeline: Pipeline,
                     tasks: list[Task]) -> dict[str, TaskRecord]:
    """The shard's tasks that earlier attempts finished and whose outputs are intact."""
    place = pipeline.writer.place
    found = read_shard_records(layout, shard, run.run_id)
    for reason in found.ignored:
        logger.warning("shard %d: task records not used: %s", shard.shard_index, reason)
    mine = {t.task_id for t in tasks}
    strangers = [task_id for task_id in found.tasks if task_id not in mine]
    if strangers:
        logger.warning("shard %d: %d recorded task(s) are not this shard's tasks (e.g. %s): ignored",
                       shard.shard_index, len(strangers), strangers[0])
    trusted, untrusted = verify((r for task_id, r in found.tasks.items() if task_id in mine), place.problem)
    for task_id, why in untrusted.items():
        logger.warning("task %s was finished by attempt %s but runs again: %s", task_id,
                       found.tasks[task_id].attempt, why)
    _remove_unfinished_outputs(found.unfinished_files, set(mine) - set(trusted), place)
    if trusted:
        logger.info("shard %d resumes: %d of %d task(s) finished in earlier attempts (%s)", shard.shard_index,
                    len(trusted), len(tasks), ", ".join(found.attempts))
    return trusted


def _remove_unfinished_outputs(unfinished: dict[str, set[str]], rerun: set[str], place: OutputPlace) -> None:
    """Files that an earlier attempt put in place for tasks that run again: the rerun writes
    the task whole and may cut it into other files, which must not sit beside these."""
    redone = sorted(rerun & set(unfinished))
    present = set(place.names()) if redone else set()  # one listing, however many tasks
    for task_id in redone:
        for name in sorted(unfinished[task_id]):
            if name in present:
                place.remove(name)
                logger.info("task %s runs again: its earlier attempt's %s removed", task_id, name)


def freezable(pipeline: Pipeline) -> bool:
    return isinstance(pipeline.source, FreezableSource)


def list_source(pipeline: Pipeline) -> list[Task]:
    """Every source task of the run, checked: deterministic, unique, none failed."""
    listed = pipeline.source.list_tasks()
    failed = [t for t in listed if isinstance(t, FailedTask)]
    if failed:
        raise SourceFailedError(
            f"source stage {pipeline.source.stage_name!r} produced {len(failed)} FailedTask(s) "
            f"(first: {failed[0].task_id}: {failed[0].reason}); a source must raise instead, "
            "since its failures have no stable id to retry"
        )
    if not listed:
        raise ConfigError(f"source stage {pipeline.source.stage_name!r} listed no tasks: nothing to do")
    validate_source_ids([t.task_id for t in listed])
    return listed


def _changed_tree(frozen: Listing, walked: Listing) -> CheckpointMismatchError:
    return CheckpointMismatchError(
        f"the input tree changed since the run froze its listing: {frozen.differences(walked)}: restore the "
        "inputs, or start a new logical run (--new-run, or a new checkpoint path)"
    )


def amend_policy(layout: CheckpointLayout, wanted: PipelineFingerprint) -> RunContract | None:
    """With --repair: a new malformed-record policy for the tasks that have not finished,
    recorded as an amendment (the only change to the pipeline a repair may make). The run's
    contract, with it; None before the run has one."""
    if not layout.run_file.is_file():
        return None
    contract = RunContract.read(layout)
    current = contract.pipeline
    if current is not None and current.only_the_policy_differs(wanted):
        amendment = write_amendment(layout, Amendment(MALFORMED, malformed=wanted.reader_policy,
                                                      before=current.reader_policy))
        logger.warning("repair: %s", amendment.describe())
        contract = contract.amended(amendment)
    return contract


def _check_inputs(pipeline: Pipeline, contract: RunContract, shard: ShardConfig, rows, tasks: list[Task],
                  repair: bool) -> None:
    """This shard's input files as the run recorded them (its listing, then its amendments);
    with --repair, a changed file of a task that has not finished is accepted and recorded."""
    source, layout, run = pipeline.source, contract.layout, contract.run
    paths = [source.location(p) for p in rows.column("path").to_pylist()]
    amended = contract.amended_files()
    recorded = [(path, *amended.get(path, (size, mtime))) for path, size, mtime in zip(
        paths, rows.column("size").to_pylist(), rows.column("mtime_ns").to_pylist())]
    changed = source.changed_files(recorded)
    if not changed:
        return
    task_of = dict(zip(paths, rows.column("task_id").to_pylist()))
    finished = (set(task_of.values()) if manifest_exists(layout, shard.shard_index)
                else set(finished_earlier(layout, shard, run, pipeline, tasks)))
    blocked = [c for c in changed if c.now is None or task_of[c.path] in finished]
    if not repair or blocked:
        if blocked and repair:
            raise CheckpointMismatchError(
                f"--repair mends only tasks that have not finished: {blocked[0].why}"
                + (" belongs to a finished task" if blocked[0].now is not None else "")
                + ": restore it, or start a new logical run (--new-run)")
        raise listings.changed_error(changed, repairable=not blocked)
    amendment = write_amendment(layout, Amendment(
        INPUT, shard_index=shard.shard_index, tasks=tuple(sorted({task_of[c.path] for c in changed})),
        files={c.path: c.now for c in changed}))
    logger.warning("repair: %s", amendment.describe())


def save_request(layout: CheckpointLayout, request: PinnedRequest | None) -> str | None:
    """Write the start's run options into the checkpoint; their id, for run.json to pin."""
    if request is None:
        return None
    try:
        return request.write(layout)
    except OSError as exc:
        raise unwritable(layout, exc) from None


def frozen_listing(pipeline: Pipeline, layout: CheckpointLayout, shards: ShardRange,
                   relist: bool = False, request: PinnedRequest | None = None,
                   compare: bool = False, contract: RunContract | None = None) -> tuple[Listing, RunContract]:
    """The run's frozen listing and contract; walked, saved and pinned by the first start.

    ``relist`` walks the tree anyway: files added to it join the run, a file removed or
    changed is refused; ``compare`` (submit, a run outside an array) walks it to say what
    differs; ``request`` is this start's run options, saved and pinned if the run has none
    yet; ``contract``: the run's, when this start has read it already. A first start writes
    nothing before its walk found input.
    """
    fingerprint = pipeline.fingerprint()
    if contract is None and layout.run_file.is_file():
        contract = RunContract.read(layout)
    if contract is not None and contract.run.listing is not None:
        frozen = listings.load(layout, contract.run.listing)
        contract = contract.with_run(pin_missing(layout, contract.run, pipeline=fingerprint,
                                                 request=save_request(layout, request)))
        contract.check(shards, None, fingerprint)  # before the tree may grow the run
        if relist or compare:
            frozen, contract = _compare_tree(pipeline, contract, frozen, relist)
        return frozen, contract
    walked = pipeline.source.snapshot()
    reference = listings.freeze(layout, walked)
    run = ensure_run_config(layout, shards, walked.task_ids, fingerprint, reference, save_request(layout, request))
    if run.listing is not None and run.listing.digest != reference.digest:
        raise _changed_tree(listings.load(layout, run.listing), walked)  # another start froze it first
    return walked, contract.with_run(run) if contract is not None else RunContract.read(layout, run)


def _compare_tree(pipeline: Pipeline, contract: RunContract, frozen: Listing,
                  relist: bool) -> tuple[Listing, RunContract]:
    """The input tree against the frozen listing (repairs applied): with ``relist`` new files
    join the run; without, one line says what differs and how to add it."""
    root = pipeline.source.input_dir
    try:
        walked = pipeline.source.snapshot()
    except ConfigError as exc:
        if relist:
            raise
        logger.warning("the input dir holds none of the run's files now (%s); the run keeps to its listing", exc)
        return frozen, contract
    amended = {pipeline.source.relative(path): stat for path, stat in contract.amended_files().items()}
    changes = frozen.compare(walked, amended)
    if not changes:
        return frozen, contract
    if not relist:
        if changes.added and not (changes.removed or changes.changed):  # those the shards' own checks refuse
            logger.warning("%s under %s since the run froze its listing: the run keeps to its listing; --relist "
                           "adds the new files to it", changes.describe(), root)
        return frozen, contract
    if changes.removed or changes.changed:
        raise _changed_tree(frozen, walked)
    return grow_run(contract, frozen, walked, len(changes.added))


def grow_run(contract: RunContract, frozen: Listing, walked: Listing, added_files: int) -> tuple[Listing, RunContract]:
    """The run with the files added to its input tree (``--relist``): the walked listing
    becomes the run's, and each complete shard that owns a new task runs again for it (its
    finished tasks are kept by their records; its manifest moves aside)."""
    layout, run = contract.layout, contract.run
    old_ids, new_ids = set(frozen.task_ids), walked.task_ids
    if not old_ids <= set(new_ids):
        raise CheckpointMismatchError(
            "--relist: the new files regroup the run's tasks (--files-per-partition > 1), so finished tasks would "
            "change: start a new logical run (--new-run) to include them")
    if layout.phases_root.is_dir() and any(layout.phases_root.iterdir()):
        raise CheckpointMismatchError(
            "--relist: the run's later phases (dedup, quality, tokens) have read its output already, and cannot "
            "take new files: start a new logical run (--new-run) to include them")
    grown = repin_listing(layout, run, walked.task_ids, listings.freeze(layout, walked))
    rerun = []
    for shard in run.shards:
        config = ShardConfig(shard, run.total_shards, run.minimum_shard_index)
        if manifest_exists(layout, shard) and set(walked.rows_of(config).column("task_id").to_pylist()) - old_ids:
            supersede_manifest(layout, shard)
            rerun.append(shard)
    logger.warning("--relist: %d file(s) added to the run (%d new task(s)); complete shard(s) that run again for "
                   "them: %s", added_files, len(set(new_ids) - old_ids), format_array_expression(rerun) or "none")
    amendment = write_amendment(layout, Amendment(RELIST, added_files=added_files,
                                                  rerun_shards=format_array_expression(rerun)))
    return walked, contract.with_run(grown).amended(amendment)


def pin_run(pipeline: Pipeline, layout: CheckpointLayout, shards: ShardRange,
            request: PinnedRequest | None = None, relist: bool = False) -> RunConfig:
    """Create the run's contract (range, listing, pipeline, options), or check this pipeline
    against it; ``relist`` adds files that joined the input tree (``submit -- --relist``)."""
    if freezable(pipeline):
        return frozen_listing(pipeline, layout, shards, relist, request=request, compare=True)[1].run
    ids = [t.task_id for t in list_source(pipeline)]
    return ensure_run_config(layout, shards, ids, pipeline.fingerprint(), request=save_request(layout, request))


def check_against_run(pipeline: Pipeline, layout: CheckpointLayout, shards: ShardRange) -> None:
    """What ``pin_run`` would refuse, without writing anything (``submit --dry-run``)."""
    if not layout.run_file.is_file():
        return
    run = read_run_config(layout)
    if freezable(pipeline) and run.listing is not None:
        frozen, walked = listings.load(layout, run.listing), pipeline.source.snapshot()
        if walked.digest != frozen.digest:
            raise _changed_tree(frozen, walked)
        check_run(layout, run, shards, None, pipeline.fingerprint())
        return
    check_run(layout, run, shards, [t.task_id for t in list_source(pipeline)], pipeline.fingerprint())


def prepare_shard(
    pipeline: Pipeline, checkpoint: str | Path | CheckpointLayout, shard: ShardConfig | None, force: bool = False,
    relist: bool = False, request: PinnedRequest | None = None, repair: bool = False, compare_tree: bool = False,
) -> PreparedShard:
    shard = shard or ShardConfig.single()
    layout = checkpoint if isinstance(checkpoint, CheckpointLayout) else CheckpointLayout(checkpoint)
    contract = amend_policy(layout, pipeline.fingerprint()) if repair else None
    if freezable(pipeline):
        frozen, contract = frozen_listing(pipeline, layout, shard.range, relist, request, compare=compare_tree,
                                          contract=contract)
        run = contract.run
        rows = frozen.rows_of(shard)
        mine = pipeline.source.tasks_from(rows)
        _check_inputs(pipeline, contract, shard, rows, mine, repair)
        total = run.source_task_count if run.source_task_count is not None else len(frozen.task_ids)
        input_bytes = int(sum(rows.column("size").to_pylist()))
    else:
        listed = list_source(pipeline)
        run = ensure_run_config(layout, shard.range, [t.task_id for t in listed], pipeline.fingerprint(),
                                request=save_request(layout, request))
        wanted = set(shard.select([t.task_id for t in listed]))
        mine = [t for t in listed if t.task_id in wanted]
        total, input_bytes = len(listed), None
    complete = manifest_exists(layout, shard.shard_index) and not force
    inputs = {t.task_id: tuple(t.metadata["relative_files"]) for t in mine if t.metadata.get("relative_files")}
    done = finished_earlier(layout, shard, run, pipeline, mine) if mine and not complete and not force else {}
    if done:
        mine = [t for t in mine if t.task_id not in done]
    if not mine and total and shard.in_range:
        logger.warning("shard %d owns none of the %d source tasks (more shards than tasks?)", shard.shard_index, total)
    return PreparedShard(pipeline, shard, layout, run, mine, complete, total, input_bytes, done, inputs)

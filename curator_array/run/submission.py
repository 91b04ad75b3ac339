"""A submitted run carries itself: its options are resolved and pinned before anything is queued.

``submit`` resolves every run option once, on the login node (flag > site ``[env]`` >
environment > default), refuses a bad value there, pins the run contract and the options
(``PinnedRequest``), and queues elements that are given only the checkpoint and the
request's id: each runs exactly the pinned options, whatever a container runtime lets
through to it. ``retry --submit`` starts from the run's latest pinned options, with the
flags it is given on top. Every phase of the run gets its own windows, each phase after the
one before.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.arrays import format_array_expression, parse_array_expression
from ..core.atomic import write_bytes_atomic
from ..core.errors import CheckpointMismatchError, CuratorArrayError
from ..core.layout import CheckpointLayout
from ..core.options import split_named
from ..core.phase import PlannedPhase
from ..core.phase_states import PhaseState
from ..core.records.run import OptionValue, PinnedRequest
from ..core.run_contract import archive_run, check_run, read_run_config
from ..core.sharding import ShardRange
from ..pipelines.options import DOWNLOADS_DIR
from ..slurm.sites import SiteConfig
from ..slurm.submit import (
    Submission,
    latest_request,
    plan_submissions,
    queued_phase_elements,
    resolve_max_array_size,
)
from .option_table import run_options
from .phases import PHASES
from .precedence import (
    SITE,
    Defaults,
    Flags,
    OptionValues,
    Pinned,
    checkpoint_of,
    for_pipeline,
    own_sources,
    request_of,
    resolve,
)
from .request import RunRequest


def submission_options(flags: Mapping[str, Any], site: SiteConfig | None, environment: Mapping[str, str]) -> OptionValues:
    """The option values ``submit`` pins: its run flags, the site's ``[env]``, the environment, the defaults."""
    label = f"{SITE} of site_configs/{site.name}.toml" if site else SITE
    return for_pipeline(resolve(own_sources(flags, environment, site.env if site else None, label)))


def run_request_id(layout: CheckpointLayout) -> str | None:
    """The run's latest pinned options: of its latest submission, else of its first start."""
    return latest_request(layout) or read_run_config(layout).request


def retry_options(layout: CheckpointLayout, flags: Mapping[str, Any], environment: Mapping[str, str]) -> OptionValues:
    """The run's latest pinned options with ``flags`` on top; a run without pinned options
    (written by an older version) is resolved as ``submit`` would."""
    request_id = run_request_id(layout)
    if request_id is None:
        return resolve(own_sources(flags, environment))
    return resolve([Flags(flags), Pinned(PinnedRequest.read(layout, request_id)), Defaults()])


def with_files_in_checkpoint(chosen: OptionValues, layout: CheckpointLayout, copy: bool = True) -> OptionValues:
    """``chosen`` with every file option's file copied into the checkpoint (named by its
    content) and the option pointing there: the checkpoint is visible to every element under
    every container runtime, and the copy cannot change under a queued run. A name where a
    file may be (a tokenizer on the Hub) is fetched first. Without ``copy`` (a dry run) the
    checkpoint is not written: files stay where they are, fetched ones go to a temporary file."""
    moved = dict(chosen)
    for option in run_options():
        given = chosen.get(option.name)
        if not option.behaviour.copies_files or given is None or not given.value:
            continue
        several = isinstance(given.value, tuple)
        items = given.value if several else (given.value,)
        names = [split_named(item)[0] + "=" if option.behaviour.named else "" for item in items]
        values = [item[len(name):] for name, item in zip(names, items)]
        pinned = [_pinned_copy(option, str(value), layout, copy) for value in values]
        if all(path == str(value) for (path, _), value in zip(pinned, values)):
            continue
        how = ", ".join(f"{how} from {value}" for (_, how), value in zip(pinned, values) if how)
        paths = tuple(name + path for name, (path, _) in zip(names, pinned))
        moved[option.name] = OptionValue(paths if several else paths[0], f"{given.source}, {how}")
    return moved


def _pinned_copy(option, value: str, layout: CheckpointLayout, copy: bool) -> tuple[str, str]:
    """Where the file of ``value`` is pinned in the checkpoint, and how it got there (empty if
    it is there already, or stays where it is in a dry run)."""
    source = Path(value)
    if source.is_file() and (layout.holds(source) or not copy):
        return value, ""
    fetched = not source.is_file()
    content = option.fetch(value) if fetched else source.read_bytes()
    name = "tokenizer.json" if fetched else source.name
    target = layout.pinned_file_path(hashlib.sha256(content).hexdigest()[:16], name)
    if not copy:
        target = Path(tempfile.mkdtemp(prefix="curator-array-")) / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, content)
    return str(target), "fetched" if fetched else "copied"


def queued_phases(request: RunRequest, request_id: str, wanted: Mapping[str, Sequence[int]],
                  plan: Sequence[PlannedPhase], script: str, max_size: int | None,
                  parallel: int | None) -> list[list[Submission]]:
    """One group of windows per phase that has elements to queue, in the phases' order (see
    ``slurm.submit.chained``), and one per pass of a phase of steps (``Phase.passes``):
    elements get the checkpoint and the request id as arguments, and the job script the
    paths it mounts (it cannot read them from the request; a selection reads the output dir of
    the run it selects from, which ``request`` holds resolved as its input dir)."""
    paths = {"OUTPUT_DIR": request.options.output_dir, "CHECKPOINT_PATH": request.checkpoint}
    if request.options.input_dir:
        paths["INPUT_DIR"] = request.options.input_dir
    groups = []
    for planned in plan:
        indices = [i for i in wanted.get(planned.name, ()) if i in planned.elements]
        if indices:
            windows = plan_submissions(
                indices, planned.elements, script, max_size, parallel,
                ("--checkpoint-path", request.checkpoint, "--request", request_id), paths, request_id,
                planned.phase.submitted_name)
            groups += [windows] * planned.phase.passes
    return groups


def refuse_while_queued(layout: CheckpointLayout, what: str) -> None:
    queued = queued_phase_elements(layout)
    if queued:
        named = "; ".join(f"{phase or 'shards'} {format_array_expression(elements)}" for phase, elements in queued.items())
        raise CuratorArrayError(
            f"{sum(map(len, queued.values()))} element(s) of this run are still queued or running ({named}): "
            f"wait for them before you {what}, or pass --force"
        )


def plan_submit(flags: Mapping[str, Any], site: SiteConfig | None, script: str, shards: ShardRange,
                array_expression: str | None, max_array_size: str | None, parallel: int | None,
                environment: Mapping[str, str], *, new_run: bool = False, force: bool = False, dry_run: bool = False,
                say: Callable[[str], None] = lambda text: None) -> tuple[CheckpointLayout, list[list[Submission]]]:
    """What ``submit`` queues: the run's contract pinned (or checked), then every phase's windows.

    ``new_run`` archives a run that differs (``say`` tells where); ``dry_run`` writes nothing;
    ``max_array_size`` is read as ``--max-array-size`` reads it, once the run is checked.
    """
    from ..storage.s3 import ensure_reachable
    from .prepare import check_against_run, pin_run

    chosen = submission_options(flags, site, environment)
    layout = checkpoint_of(chosen)
    chosen = with_files_in_checkpoint(chosen, layout, copy=False)  # names fetched, nothing written yet
    PHASES.check(request_of(chosen).options.phases, shards)
    request = request_of(with_files_in_checkpoint(chosen, layout, copy=not dry_run))
    pinned = request.pinned
    ensure_reachable(request.options.stores())  # a store that does not answer: refused in seconds

    def start_new_run() -> None:
        if not new_run or dry_run:
            raise
        if not force:
            refuse_while_queued(layout, "start a new run")
        outputs = Path(request.options.output_dir)
        archive = archive_run(layout, outputs, kept=(DOWNLOADS_DIR,))
        say(f"archived the previous run's records and outputs in {archive}; {outputs} holds only the new run's")

    try:  # a crawl's paths list fetched again, and a selected run, must be the ones the run saved
        resolved = request.with_crawls(refresh=True, save=not dry_run).with_selection(PHASES, refresh=True,
                                                                                       save=not dry_run)
    except CheckpointMismatchError:
        start_new_run()
        resolved = request.with_crawls(refresh=True).with_selection(PHASES, refresh=True)
    pipeline = resolved.build_pipeline(PHASES)
    plan = PHASES.plan(pipeline.phases, shards)
    try:
        if dry_run:
            check_against_run(pipeline, layout, shards)
        else:
            pin_run(pipeline, layout, shards, pinned, relist=request.relist)
    except CheckpointMismatchError:
        start_new_run()
        pin_run(pipeline, layout, shards, pinned, relist=request.relist)
    wanted = {planned.name: list(planned.elements) for planned in plan}
    wanted[plan[0].name] = parse_array_expression(array_expression) if array_expression else shards.indices()
    max_size = resolve_max_array_size(max_array_size, environment, default="auto")
    return layout, queued_phases(resolved, pinned.id, wanted, plan, script, max_size, parallel)


def plan_retry_submit(layout: CheckpointLayout, flags: Mapping[str, Any], states: Sequence[PhaseState], script: str,
                      max_array_size: str | None, parallel: int | None, environment: Mapping[str, str], *,
                      force: bool = False, dry_run: bool = False) -> list[list[Submission]]:
    """What ``retry --submit`` queues: the missing elements of every phase, under the run's
    latest pinned options with ``flags`` on top (which must keep the run's pipeline)."""
    from .prepare import save_request

    request = request_of(with_files_in_checkpoint(retry_options(layout, flags, environment), layout,
                                                  copy=not dry_run))
    resolved = request.with_crawls(refresh=True, save=not dry_run).with_selection(PHASES, refresh=True, save=not dry_run)
    pipeline = resolved.build_pipeline(PHASES)
    if request.repair and not dry_run:
        from .prepare import amend_policy

        amend_policy(layout, pipeline.fingerprint())
    run = read_run_config(layout)
    check_run(layout, run, run.shards, pipeline=pipeline.fingerprint())
    if not force:
        refuse_while_queued(layout, "resubmit")
    pinned = request.pinned
    if not dry_run:
        save_request(layout, pinned)
    wanted = {state.name: state.missing for state in states}
    plan = [PlannedPhase(state.phase, state.elements) for state in states]
    max_size = resolve_max_array_size(max_array_size, environment, default="auto")
    return queued_phases(resolved, pinned.id, wanted, plan, script, max_size, parallel)

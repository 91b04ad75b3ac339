"""The context every phase's work gets (``PhaseContext``), and one element of a phase after
the first, from its start to its recorded outcome.

An element first holds the run to its contract (the pipeline with its phase settings must
be the one ``run.json`` pins) and checks that the elements it reads are complete; if not,
it exits 2 at once naming them, so an element queued behind a failed phase ends quickly
instead of waiting forever. Then its phase does the work (``Phase.work``, in the phase's
own file) and the element writes its completion manifest; an error leaves an attempt
record, SIGKILL nothing: either way the element has no manifest and ``retry`` names it.

No Ray: each element is file work in one process, bounded by its share (docs/dedup.md).
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..core.arrays import format_array_expression
from ..core.errors import ConfigError, CuratorArrayError
from ..core.formats import DEFAULT_FORMAT
from ..core.layout import CheckpointLayout, PhaseLayout, utc_now
from ..core.phase import OutputChain, Phase, PhaseSettings, PlannedPhase, RootPhase, needed
from ..core.records.phase import PhaseFailure, PhaseManifest, phase_manifests
from ..core.records.shard import shard_output_files
from ..core.run_contract import RunConfig, check_run, read_run_config
from ..core.sharding import ShardRange
from ..slurm.job_context import JobContext
from ..slurm.jobenv import JobEnvironment
from ..storage.places import joined
from . import startup_log
from .huge_pages import huge_page_advice
from .request import RunRequest
from .stopping import ShardStopped, StopController

logger = logging.getLogger(__name__)


class InputsIncomplete(ConfigError):
    """A phase element started before the elements it reads were complete."""


def open_run(request: RunRequest, registry: Any) -> RunConfig:
    """The run of the request's checkpoint; refused without a run, or with other phase settings
    or another text field than it pins (what its later phases read). The first phase's stages
    are not built: an element of a later phase reads their output, and starts in a fraction
    of the time."""
    layout = request.layout
    if not layout.run_file.is_file():
        raise ConfigError(f"{layout.root} holds no run yet: the later phases start after its first phase "
                          "(curator-array run, or submit)")
    run = read_run_config(layout)
    if run.pipeline is not None:
        wanted = run.pipeline.with_phases(request.options.phases.fingerprint(), set(registry.settings_keys()))
        check_run(layout, run, run.shards, pipeline=replace(wanted, text_field=request.options.text_field))
    return run


@dataclass
class PhaseContext:
    """What the work of an element of any phase is given: the request, the job (its
    environment and shard), the run's phases (the phase registry), the stop controller the
    caller installed and a client factory replacing the Ray client the request asks for
    (tests, benchmarks). The run's contract, its phases and their manifests are read when
    first asked for (a first-phase shard creates the contract), and once per process."""

    request: RunRequest
    job_context: JobContext
    registry: Any  # the run's phases: run.phases.PhaseRegistry
    stop: StopController | None = None
    client_factory: Callable | None = None
    current: tuple[str, int] | None = None  # the element being run
    started: float = 0.0
    last_report: float = 0.0
    known: dict[str, dict[int, PhaseManifest]] = field(default_factory=dict)  # see ``manifests``
    done: dict[str, set[int]] = field(default_factory=dict)  # see ``complete``

    @property
    def job(self) -> JobEnvironment:
        return self.job_context.job

    @property
    def cpus(self) -> int:
        """The CPUs this element's work may spread over (``helpers.parallel``): ``--num-cpus``,
        else what SLURM granted the job on this node, within the affinity mask."""
        from ..helpers.parallel import granted_cpus

        return granted_cpus(self.request.num_cpus, self.job.cpus_on_node, self.job.cpus_per_task)

    def tick_stop(self) -> None:
        """Raises when the run is told to stop."""
        if self.stop is not None:
            self.stop.raise_if_requested()

    def tick(self, done: int = 0, of: int = 0) -> None:
        """Between files: stop when told to, and say how far the element is every
        ``--progress-interval`` seconds."""
        self.tick_stop()
        now, interval = time.monotonic(), self.request.progress_interval
        if of and interval and now - self.last_report >= interval and self.current is not None:
            self.last_report = now
            logger.info("%s element %d: %d/%d files, %.0fs", *self.current, done, of, now - self.started)

    def over_cpus(self, function: Callable[[Any], Any], jobs: Iterable[Any], count: int) -> Iterator[Any]:
        """``function(job)`` for each of the ``count`` jobs (one file each), in order, over the
        element's CPUs (``helpers.parallel``), with a tick after each."""
        from ..helpers.parallel import ordered_map

        for done, result in enumerate(ordered_map(function, jobs, self.cpus)):
            self.tick(done + 1, count)
            yield result

    @property
    def layout(self) -> CheckpointLayout:
        return self.request.layout

    @cached_property
    def run(self) -> RunConfig:
        return open_run(self.request, self.registry)

    @cached_property
    def plan(self) -> list[PlannedPhase]:
        return self.registry.plan_of(self.run)

    @cached_property
    def chain(self) -> OutputChain:
        """Which phases of the run write its documents, and where each reads them."""
        return OutputChain.of([item.phase for item in self.plan])

    @cached_property
    def settings(self) -> PhaseSettings:
        return self.registry.settings_of(self.run.pipeline)

    def settings_of(self, phase: Phase) -> Any:
        """The settings ``phase`` is planned by, as the run pins them."""
        return self.settings.get(phase.settings_key)

    @property
    def staged(self) -> str:
        """Where the first phase wrote its files (a directory or an ``s3://`` prefix)."""
        return self.request.options.written_dir

    @property
    def output_dir(self) -> str:
        """The run's output (a directory or an ``s3://`` prefix: ``storage.places``)."""
        return self.request.options.output_dir

    def written_dir(self, phase: Phase) -> str:
        """Where ``phase``, a writer of the run's output, writes: the output dir when no later
        phase rewrites its files, else its hidden staging dir there."""
        if self.chain.is_last(phase):
            return self.output_dir
        return self.staged if isinstance(phase, RootPhase) else joined(self.output_dir, phase.staging_dir)

    def input_dir(self, phase: Phase) -> str:
        """Where the output files ``phase`` reads are: those of the last writer before it."""
        return self.written_dir(self.chain.before(phase))

    def input_files(self, phase: Phase, shard: int) -> tuple[str, ...]:
        """The output files of curation shard ``shard`` that ``phase`` reads, relative to
        ``input_dir(phase)``."""
        return self.chain.before(phase).files_written(self, shard)

    def curated_files(self, shard: int) -> tuple[str, ...]:
        """The files the first phase wrote for shard ``shard``, relative to where it wrote them."""
        return shard_output_files(self.layout, shard)

    @property
    def output_format(self) -> str:
        return self.run.output_format or DEFAULT_FORMAT

    @property
    def text_field(self) -> str:
        return self.request.options.text_field

    def planned(self, name: str) -> PlannedPhase:
        """The phase named ``name`` in this run, with its elements."""
        for item in self.plan:
            if item.name == name:
                return item
        flag = self.registry.enabling_flag(self.registry.get(name))
        raise ConfigError(f"the run in {self.layout.root} has no {name} phase"
                          + (f" (it was started without {flag})" if flag else ""))

    def phase(self, name: str) -> Phase:
        return self.planned(name).phase

    def elements(self, name: str) -> ShardRange:
        return self.planned(name).elements

    def phase_layout(self, name: str) -> PhaseLayout:
        return self.phase(name).layout_of(self.layout)

    def manifests(self, name: str, refresh: bool = False) -> dict[int, PhaseManifest]:
        """The complete elements of the later phase ``name``: read once (again with
        ``refresh``), then kept up to date by ``run_element``, so running many elements in
        one process does not reread every manifest for each."""
        if refresh or name not in self.known:
            phase = self.phase(name)
            self.known[name] = phase_manifests(phase.layout_of(self.layout), self.run.run_id, phase.counts)
        return self.known[name]

    def complete(self, phase: Phase, refresh: bool = False) -> set[int]:
        """The complete elements of ``phase``, as its records say (the first phase's: the
        spec's manifests)."""
        if refresh or phase.name not in self.done:
            self.done[phase.name] = phase.complete_elements(self.layout, self.run)
        return self.done[phase.name]

    def missing_inputs(self, phase: Phase, index: int) -> str | None:
        """What ``phase``'s element ``index`` waits for, or None when its inputs are complete."""
        for before in needed(self.plan, phase):
            done = self.complete(before.phase)
            wanted = [index] if phase.matching_elements else list(before.elements)
            missing = [i for i in wanted if i not in done]
            if missing:
                return f"{before.name} {before.phase.element_noun}(s) {format_array_expression(missing)}"
        return None

    def finished(self, phase: Phase, index: int, elements: int, counts: Any, started: str,
                 clock: float) -> PhaseManifest:
        """The manifest of ``phase``'s element ``index``, started at ``started`` (``clock``:
        its ``time.monotonic()``) and finished now, in this job."""
        return PhaseManifest(
            phase.name, index, elements, self.run.run_id, counts, started, utc_now(),
            round(time.monotonic() - clock, 3), round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            str(self.job.attempt_id()), self.job.identity())

    def memory_limit_mb(self) -> float | None:
        """The job's memory on this node, else what the machine has available."""
        if self.job.mem_per_node_mb:
            return float(self.job.mem_per_node_mb)
        try:
            with open("/proc/meminfo") as handle:
                for line in handle:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None


def refuse_beyond_memory(element: str, items: int, noun: str, bytes_each: int, limit_mb: float | None,
                         instead: str = "split the corpus into runs chained with --dedup-against") -> None:
    """Refuse an element whose share (``items`` of ``bytes_each``) cannot fit in its memory;
    ``instead`` says what else the user can change."""
    needed_mb = items * bytes_each / 2**20
    if limit_mb is not None and needed_mb > 0.8 * limit_mb:
        raise ConfigError(
            f"the {element} element would hold {items:,} {noun}, about {needed_mb:,.0f} MiB, but it has "
            f"{limit_mb:,.0f} MiB: give it more memory (memory = \"{int(needed_mb * 1.5)}M\" in the site file, or "
            f"sbatch --mem), or {instead}")


def run_element(context: PhaseContext, phase: Phase, index: int, force: bool = False) -> PhaseManifest | None:
    """One element of ``phase`` (one step of it, for a phase of steps); None when it was
    already complete, or has steps left."""
    layout, elements = context.layout, context.elements(phase.name)
    if index not in elements:
        raise ConfigError(f"{phase.name} has elements {elements}, not {index} (TOTAL_SHARDS and the array must "
                          "match what submit queued: curator-array retry prints them)")
    if not force and index in context.complete(phase):
        logger.info("%s element %d is already complete", phase.name, index)
        return None
    attempt = context.job.attempt_id()
    phase_layout = phase.layout_of(layout)
    started, clock = utc_now(), time.monotonic()
    try:
        missing = context.missing_inputs(phase, index)
        if missing:
            raise InputsIncomplete(
                f"{phase.name} element {index} cannot start: {missing} of the run in {layout.root} are not "
                "complete; curator-array status shows what blocks it, curator-array retry what to resubmit")
        startup_log.release()  # past its checks: what it logs now is progress
        logger.info("%s element %d of %s: starting%s", phase.name, index, elements,
                    f" over {context.cpus} CPU(s)" if phase.spreads else "")
        context.current, context.started = (phase.name, index), time.monotonic()
        context.last_report = context.started
        with huge_page_advice(phase.huge_pages):
            result = phase.work(context, index)
    except BaseException as exc:
        code = exc.exit_code if isinstance(exc, (CuratorArrayError, ShardStopped)) else 1
        PhaseFailure(phase.name, index, str(attempt), str(exc) or type(exc).__name__, code,
                     context.job.identity()).write(phase_layout, attempt)
        raise
    if not result.complete:
        logger.info("%s element %d: a step done in %.1fs; the next runs when every element has done this one",
                    phase.name, index, time.monotonic() - clock)
        return None
    manifest = context.finished(phase, index, len(elements), result.counts, started, clock)
    path = manifest.write(phase_layout)
    context.manifests(phase.name)[index] = manifest
    context.complete(phase).add(index)
    figures = ", ".join(f"{k} {v}" for k, v in result.counts.figures().items())
    logger.info("%s element %d complete in %.1fs: %s; manifest %s", phase.name, index, manifest.duration_s, figures,
                path)
    return manifest


def run_ready_phases(context: PhaseContext, force: bool = False) -> str | None:
    """Every element after the root whose inputs are complete, phase by phase, in this process.

    Returns what the next phase still waits for (None when the run is complete): a run of
    one shard at a time on a workstation finishes the later phases with its last shard.
    """
    for planned in context.plan[1:]:  # after the first phase: its shards are run apart, each on Ray
        waiting = run_phase(context, planned.phase, force)
        if waiting:
            return waiting
    return None


def run_phase(context: PhaseContext, phase: Phase, force: bool = False, wait: bool = True) -> str | None:
    """Every element of ``phase`` in this process, step after step for a phase of steps,
    until it is complete; what it waits for, or None. Without ``wait`` an element whose
    inputs are incomplete is refused (``InputsIncomplete``, with its attempt record)."""
    elements = context.elements(phase.name)
    forced = set(elements) if force else set()
    while True:
        done = context.complete(phase, refresh=True) - forced
        pending = [index for index in elements if index not in done]
        if not pending:
            return None
        for index in pending:
            missing = context.missing_inputs(phase, index)
            if missing and wait:
                return f"{phase.name} waits for {missing}"
            run_element(context, phase, index, index in forced)
            forced.discard(index)

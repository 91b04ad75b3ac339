"""One element of a phase after the root, from its start to its recorded outcome.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..core.arrays import format_array_expression
from ..core.checkpoint import scan_completion_manifests
from ..core.errors import ConfigError, CuratorArrayError
from ..core.formats import DEFAULT_FORMAT
from ..core.layout import CheckpointLayout, PhaseLayout, utc_now
from ..core.phase import Counts, Phase, PlannedPhase, needed
from ..core.records.phase import PhaseFailure, PhaseManifest, phase_manifests
from ..core.run_contract import RunConfig, check_pipeline, read_run_config
from ..core.sharding import ShardRange
from ..pipelines.phase_settings import PhaseSettings
from ..slurm.jobenv import JobEnvironment
from .request import RunRequest
from .stopping import ShardStopped

logger = logging.getLogger(__name__)


class InputsIncomplete(ConfigError):
    """A phase element started before the elements it reads were complete."""


def open_run(request: RunRequest) -> RunConfig:
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
        pinned = {key: value for key, value in run.pipeline.items() if key not in PhaseSettings.KEYS}
        check_pipeline(layout, run, {**pinned, **request.options.phase_settings.fingerprint(),
                                     "text_field": request.options.text_field})
    return run


@dataclass
class PhaseContext:
    """What every element of one run's later phases shares: the request, the run's contract
    and its phases, the job; each phase's manifests are read once per process."""

    request: RunRequest
    run: RunConfig
    plan: list[PlannedPhase]
    job: JobEnvironment
    tick_stop: Callable[[], None] = lambda: None  # raises when the run is told to stop
    current: tuple[str, int] | None = None  # the element being run
    started: float = 0.0
    last_report: float = 0.0
    known: dict[str, dict[int, PhaseManifest]] = field(default_factory=dict)  # see ``manifests``

    def tick(self, done: int = 0, of: int = 0) -> None:
        """Between files: stop when told to, and say how far the element is every
        ``--progress-interval`` seconds."""
        self.tick_stop()
        now, interval = time.monotonic(), self.request.progress_interval
        if of and interval and now - self.last_report >= interval and self.current is not None:
            self.last_report = now
            logger.info("%s element %d: %d/%d files, %.0fs", *self.current, done, of, now - self.started)

    @property
    def layout(self) -> CheckpointLayout:
        return self.request.layout

    @cached_property
    def settings(self) -> PhaseSettings:
        return PhaseSettings.of_fingerprint(self.run.pipeline)

    @property
    def staged(self) -> Path:
        """Where the first phase wrote its files."""
        return Path(self.request.options.written_dir)

    @property
    def output_dir(self) -> Path:
        return Path(self.request.options.output_dir)

    @property
    def output_format(self) -> str:
        return self.run.output_format or DEFAULT_FORMAT

    @property
    def text_field(self) -> str:
        return self.request.options.text_field

    def phase_layout(self, phase: Phase) -> PhaseLayout:
        return phase.layout_of(self.layout)

    def planned(self, phase: Phase) -> PlannedPhase:
        for item in self.plan:
            if item.name == phase.name:
                return item
        raise ConfigError(f"the run in {self.layout.root} has no {phase.name} phase"
                          + (f" (it was started without {phase.added_by})" if phase.added_by else ""))

    def elements(self, phase: Phase) -> ShardRange:
        return self.planned(phase).elements

    @cached_property
    def root_complete(self) -> set[int]:
        return scan_completion_manifests(self.layout, self.run).shards

    def manifests(self, phase: Phase, refresh: bool = False) -> dict[int, PhaseManifest]:
        """The complete elements of a phase: read once (again with ``refresh``), then kept up
        to date by ``run_element``, so running many elements in one process does not reread
        every manifest for each."""
        if refresh or phase.name not in self.known:
            self.known[phase.name] = phase_manifests(self.phase_layout(phase), self.run.run_id, phase.counts)
        return self.known[phase.name]

    def complete(self, phase: Phase) -> set[int]:
        return self.root_complete if phase.is_root else set(self.manifests(phase))

    def missing_inputs(self, phase: Phase, index: int) -> str | None:
        """What ``phase``'s element ``index`` waits for, or None when its inputs are complete."""
        for before in needed(self.plan, phase):
            done = self.complete(before.phase)
            wanted = [index] if phase.matching_elements else list(before.elements)
            missing = [i for i in wanted if i not in done]
            if missing:
                return f"{before.name} {before.phase.element_noun}(s) {format_array_expression(missing)}"
        return None

    def finished(self, phase: Phase, index: int, elements: int, counts: Counts, started: str,
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
    layout, elements = context.layout, context.elements(phase)
    if index not in elements:
        raise ConfigError(f"{phase.name} has elements {elements}, not {index} (TOTAL_SHARDS and the array must "
                          "match what submit queued: curator-array retry prints them)")
    if not force and index in context.complete(phase):
        logger.info("%s element %d is already complete", phase.name, index)
        return None
    attempt = context.job.attempt_id()
    phase_layout = context.phase_layout(phase)
    started, clock = utc_now(), time.monotonic()
    try:
        missing = context.missing_inputs(phase, index)
        if missing:
            raise InputsIncomplete(
                f"{phase.name} element {index} cannot start: {missing} of the run in {layout.root} are not "
                "complete; curator-array status shows what blocks it, curator-array retry what to resubmit")
        logger.info("%s element %d of %s: starting", phase.name, index, elements)
        context.current, context.started = (phase.name, index), time.monotonic()
        context.last_report = context.started
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
    context.manifests(phase)[index] = manifest
    figures = ", ".join(f"{k} {v}" for k, v in result.counts.figures().items())
    logger.info("%s element %d complete in %.1fs: %s; manifest %s", phase.name, index, manifest.duration_s, figures,
                path)
    return manifest


def run_ready_phases(context: PhaseContext, force: bool = False) -> str | None:
    """Every element after the root whose inputs are complete, phase by phase, in this process.

    Returns what the next phase still waits for (None when the run is complete): a run of
    one shard at a time on a workstation finishes the later phases with its last shard.
    """
    for planned in context.plan:
        if not planned.phase.is_root:
            waiting = run_phase(context, planned.phase, force)
            if waiting:
                return waiting
    return None


def run_phase(context: PhaseContext, phase: Phase, force: bool = False, wait: bool = True) -> str | None:
    """Every element of ``phase`` in this process, step after step for a phase of steps,
    until it is complete; what it waits for, or None. Without ``wait`` an element whose
    inputs are incomplete is refused (``InputsIncomplete``, with its attempt record)."""
    elements = context.elements(phase)
    forced = set(elements) if force else set()
    while True:
        done = set(context.manifests(phase, refresh=True)) - forced
        pending = [index for index in elements if index not in done]
        if not pending:
            return None
        for index in pending:
            missing = context.missing_inputs(phase, index)
            if missing and wait:
                return f"{phase.name} waits for {missing}"
            run_element(context, phase, index, index in forced)
            forced.discard(index)

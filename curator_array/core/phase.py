"""What a phase of a run is, as every layer sees it without naming one.

A run is a chain of phases, in the order of the phase registry (``run.phases``), each
present when its ``elements`` for the run are not None. The first is a ``RootPhase``: its
elements are the spec's logical shards and its records the spec's completion manifests
and attempt records, so the reference system reads them. Every phase after it has its own
array elements, completion manifests and attempt records (``records.phase``), and an
element starts only when the elements it reads are complete.

A phase is one object: its name, the phases whose elements it reads (``needs``), its
elements in a run, the noun of its data, the type of the counts its manifests hold, the
settings it is planned by and the run options that set them, and its work. Status, retry,
submit and the report loop over the phases of a run and use only this declaration. Pure:
the work's context is the run layer's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, ClassVar

from .checkpoint import ManifestScan, scan_completion_manifests
from .counts import Counts
from .curation_counts import CurationCounts
from .layout import CheckpointLayout, PhaseLayout
from .pinned_settings import PinnedSettings
from .records.phase import PhaseManifest, phase_failures, phase_manifests
from .run_contract import RunConfig
from .sharding import ShardRange

SHARD = "shard"


@dataclass(frozen=True)
class PhaseResult:
    """What an element's work did: its counts, and the exit code of the element (the root
    phase records its own manifest; its code says whether it did)."""

    counts: Counts
    exit_code: int = 0
    complete: bool = True  # False: one step of the element's work is done, and it runs again (``Phase.passes``)


@dataclass(frozen=True)
class PhaseSettings:
    """The settings of a run's later phases, by the key of the phases that read them
    (``dedup``, ``tokenize``), as the pipeline fingerprint pins them under those keys; a key
    is absent when the run does not have those phases. The phase registry builds them from
    the run options, or reads them back from a fingerprint.

    ``output_staged``: a later phase writes the run's output (dedup's removal), so the first
    phase writes to a staging directory instead.
    """

    by_key: Mapping[str, Any] = field(default_factory=dict)
    output_staged: bool = False

    def get(self, key: str | None) -> Any:
        return self.by_key.get(key) if key else None

    def fingerprint(self) -> dict[str, Any]:
        """What the pipeline fingerprint holds of these (nothing for a run without them)."""
        return {key: settings.to_json() for key, settings in self.by_key.items()}


@dataclass(frozen=True)
class PhaseState:
    """One phase of a run as its records show it."""

    phase: Phase
    elements: ShardRange
    complete: tuple[int, ...]
    failed: dict[int, str]  # element → the latest recorded reason, for incomplete elements
    manifests: dict[int, PhaseManifest] = field(default_factory=dict)
    progress: str | None = None  # how far an incomplete phase of steps has gone (``Phase.progress``)
    # The complete elements' counts and seconds summed already, where the manifests are not
    # kept (the first phase's: its scan adds them up as it reads them).
    summed: tuple[Counts, float] | None = None

    @property
    def name(self) -> str:
        return self.phase.name

    @property
    def missing(self) -> tuple[int, ...]:
        done = set(self.complete)
        return tuple(i for i in self.elements if i not in done)

    @property
    def is_complete(self) -> bool:
        return not self.missing

    def totals(self) -> Counts:
        """What its complete elements counted together."""
        if self.summed is not None:
            return self.summed[0]
        return reduce(lambda a, b: a + b, (m.counts for m in self.manifests.values()), self.phase.counts())

    def rate(self) -> float | None:
        """Its counts' ``RATE`` figure per second of its complete elements' time, if it has one."""
        figure = self.phase.counts.RATE
        seconds = self.summed[1] if self.summed is not None else sum(
            m.duration_s or 0.0 for m in self.manifests.values())
        return getattr(self.totals(), figure) / seconds if figure and seconds else None


class Phase:
    """One phase of a run. Subclasses set the class attributes and implement ``work``.

    ``needs`` names the phases whose elements this one reads, among those of the run (a
    phase that reads the output of whichever phase came last may name several);
    ``matching_elements`` says that element ``i`` reads element ``i`` of each of them (they
    share the curation shards), else it reads all their elements. ``noun`` names what one
    element's data is (``bucket_3.pairs``). ``passes`` is how many times one submission
    queues its elements, each window after the one before, for a phase whose element does
    one step a run (its work says ``complete=False`` until the last).

    ``settings_key`` names the settings the phase is planned by (``PhaseSettings``): it is
    part of a run when they are. One phase of those that share them brings them: its
    ``settings_type`` builds them from its run ``options`` (each sets the field its
    ``sets`` names; the option named as the key turns the phases on, and so do those named in
    ``also_enabled_by``), pins them in the
    pipeline fingerprint and reads them back (with the values of the run options named in
    ``run_values``: where the checkpoint is, say). ``output_staged`` says that the phase rewrites
    the run's output files: the last such phase of a run writes into the output dir, and
    each writer before it into its hidden ``staging_dir`` there, which the next one reads.
    ``spreads`` says that its work goes over the element's CPUs (``helpers.parallel``).
    ``huge_pages`` False: its element asks numpy not to advise huge pages for its arrays
    (``run.huge_pages``), for work made of fresh arrays of GBs.
    """

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    noun: ClassVar[str] = "element"
    counts: ClassVar[type[Counts]] = Counts
    matching_elements: ClassVar[bool] = False
    passes: ClassVar[int] = 1
    settings_key: ClassVar[str | None] = None
    settings_type: ClassVar[type[PinnedSettings] | None] = None
    also_enabled_by: ClassVar[tuple[str, ...]] = ()  # options besides the settings key that turn its phases on
    options: ClassVar[tuple[Any, ...]] = ()  # core.options.RunOption
    output_staged: ClassVar[bool] = False
    staging_dir: ClassVar[str] = ""
    run_values: ClassVar[tuple[str, ...]] = ()  # run options, not its own, whose values its settings are built with
    spreads: ClassVar[bool] = False
    huge_pages: ClassVar[bool] = True

    @property
    def element_noun(self) -> str:
        """How messages count its elements: shards when they are the run's shards."""
        return SHARD if self.noun == SHARD else "element"

    @property
    def submitted_name(self) -> str | None:
        """The phase a submission of its elements names (they run with ``--phase NAME``)."""
        return self.name

    def published(self, layout: CheckpointLayout) -> dict[str, Any] | None:
        """What the phase publishes of the run (``status --json`` shows it under the phase's
        name), once it is complete; None for most phases."""
        return None

    def enabled_by(self, values: Mapping[str, Any]) -> bool:
        """Whether the run option ``values`` turn this phase's settings on."""
        return any(values.get(name) for name in (self.settings_key, *self.also_enabled_by))

    def layout_of(self, layout: CheckpointLayout) -> PhaseLayout:
        """Where this phase's records and data live in the checkpoint ``layout``."""
        return PhaseLayout(layout, self.name, self.noun)

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        """The phase's elements in a run with ``settings`` and ``shards``; None: not in this
        run. By default one per curation shard, when the run has the phase's settings."""
        return shards if settings.get(self.settings_key) is not None else None

    def check(self, settings: PhaseSettings) -> None:
        """Refuse settings that cannot work, before any element of the run starts (at submit,
        and when a first-phase shard starts); by default every setting can."""

    def work(self, context: Any, index: int) -> PhaseResult:
        """Do element ``index``: its inputs are complete; return what it counted."""
        raise NotImplementedError

    def files_written(self, context: Any, shard: int) -> tuple[str, ...]:
        """The files a writer of the run's output wrote for curation shard ``shard``, relative
        to where it wrote them: by default the names the first phase gave them."""
        return context.curated_files(shard)

    def before_writer(self, settings: Any, options: Any) -> list:
        """Stages the first phase runs on every document just before writing it, for this
        phase (``settings``: its own; ``options``: the pipeline options)."""
        return []

    def progress(self, records: PhaseLayout, run_id: str | None, elements: int) -> str | None:
        """How far an incomplete phase of steps has gone in run ``run_id`` with ``elements``
        elements, from its records; None for a phase whose elements are done in one go."""
        return None

    def complete_elements(self, layout: CheckpointLayout, run: RunConfig) -> set[int]:
        """The elements whose completion the records in ``layout`` hold."""
        return set(phase_manifests(self.layout_of(layout), run.run_id, self.counts))

    def read_state(self, layout: CheckpointLayout, run: RunConfig, elements: ShardRange,
                   scan: ManifestScan | None = None) -> PhaseState:
        """The phase as its records in ``layout`` show it."""
        records = self.layout_of(layout)
        manifests = phase_manifests(records, run.run_id, self.counts)
        failed = {f.index: f.error for _, f in phase_failures(records) if f.index not in manifests and f.index in elements}
        complete = tuple(i for i in elements if i in manifests)
        progress = self.progress(records, run.run_id, elements.total) if len(complete) < elements.total else None
        return PhaseState(self, elements, complete, failed, {i: m for i, m in manifests.items() if i in elements},
                          progress)

    def retry_fields(self, line: str) -> str:
        """A line of ``retry --format fields`` for this phase's elements: the spec's four
        fields, and the phase, whose elements take ``--phase``."""
        return f"{line} {self.name}"

    def __repr__(self) -> str:
        return f"<phase {self.name}>"


class RootPhase(Phase):
    """The first phase of every run: its elements are the run's logical shards, and its
    records the spec's (completion manifests, attempt records), so the reference system and
    its tools read them. Its elements run without ``--phase``, and its retry lines are the
    spec's four fields."""

    noun = SHARD
    counts = CurationCounts

    @property
    def submitted_name(self) -> None:
        return None

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange:
        return shards

    def complete_elements(self, layout: CheckpointLayout, run: RunConfig) -> set[int]:
        return scan_completion_manifests(layout, run).shards

    def read_state(self, layout: CheckpointLayout, run: RunConfig, elements: ShardRange,
                   scan: ManifestScan | None = None) -> PhaseState:
        """``scan``: the run's completion manifests, when the caller has read them already."""
        scan = scan or scan_completion_manifests(layout, run)
        return PhaseState(self, elements, tuple(sorted(s for s in scan.shards if s in elements)), {},
                          summed=(scan.counts, sum(scan.durations)))

    def retry_fields(self, line: str) -> str:
        return line


@dataclass(frozen=True)
class PlannedPhase:
    """A phase of one run and its elements there."""

    phase: Phase
    elements: ShardRange

    @property
    def name(self) -> str:
        return self.phase.name


# In a phase's ``needs``: the run's documents as the last phase before it that writes them
# left them (the first phase, or one that rewrites its output), whichever that is in a run.
OUTPUT = "output"


@dataclass(frozen=True)
class OutputChain:
    """The phases of one run that write its documents, in the run's order: the first phase,
    then each that rewrites what the one before wrote (``Phase.output_staged``). The last of
    them writes into the output dir, each before it into a hidden staging dir there, which
    the next one reads. One value, computed from the plan, that everything asks: where a phase
    reads the documents, where a writer writes them, which files are the run's output."""

    phases: tuple[str, ...]  # every phase of the run, in order
    writers: tuple[Phase, ...]

    @classmethod
    def of(cls, phases: list[Phase]) -> OutputChain:
        return cls(tuple(phase.name for phase in phases),
                   tuple(phase for phase in phases if isinstance(phase, RootPhase) or phase.output_staged))

    @property
    def last(self) -> Phase:
        """The writer whose files are the run's output."""
        return self.writers[-1]

    @property
    def staged(self) -> bool:
        """Whether a phase after the first rewrites the output (the first then writes to staging)."""
        return len(self.writers) > 1

    def before(self, phase: Phase) -> Phase:
        """The last writer before ``phase``: whose documents ``phase`` reads."""
        position = self.phases.index(phase.name) if phase.name in self.phases else len(self.phases)
        return [writer for writer in self.writers if self.phases.index(writer.name) < position][-1]

    def is_last(self, phase: Phase) -> bool:
        """Whether ``phase`` writes into the output dir itself (no later phase rewrites its files)."""
        return self.last.name == phase.name


def needed(plan: list[PlannedPhase], phase: Phase) -> list[PlannedPhase]:
    """The phases of the run whose elements ``phase`` reads (``OUTPUT``: the writer before it)."""
    names = set(phase.needs)
    if OUTPUT in names:
        names = (names - {OUTPUT}) | {OutputChain.of([item.phase for item in plan]).before(phase).name}
    return [planned for planned in plan if planned.name in names]

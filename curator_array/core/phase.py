"""What a phase of a run is, as every layer sees it without naming one.

A run is a chain of phases, in the order of the phase registry (``run.phases``), each
present when its ``elements`` for the run are not None. The first, the root, needs no other
phase: its elements are the spec's logical shards and its records the spec's completion
manifests, so the reference system reads them. Every phase after it has its own array
elements, completion manifests and attempt records (``phase_records``), and an element
starts only when the elements it reads are complete.

A phase is one object: its name, the phases whose elements it reads (``needs``), its
elements in a run, the noun of its data, the type of the counts its manifests hold, and
its work. Status, retry, submit and the report loop over the phases of a run and use only
this declaration. Pure: the work's context is the run layer's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from .layout import CheckpointLayout, PhaseLayout
from .sharding import ShardRange

SHARD = "shard"


@dataclass(frozen=True)
class Counts:
    """A phase element's figures, typed. Subclasses are dataclasses of ``int`` fields,
    histograms (``histogram``: how many things have each size) and breakdowns
    (``breakdown``: a figure per name, tokens per language say); elements add up. ``RATE``
    names the figure whose rate per second of element time status shows."""

    RATE: ClassVar[str | None] = None

    def __add__(self, other: Counts) -> Counts:
        values = {}
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            if isinstance(mine, dict):
                merged = dict(mine)
                for key, count in theirs.items():
                    merged[key] = merged.get(key, 0) + count
                values[item.name] = dict(sorted(merged.items()))
            else:
                values[item.name] = mine + theirs
        return type(self)(**values)

    def to_json(self) -> dict[str, Any]:
        return {item.name: ({str(k): v for k, v in value.items()} if isinstance(value := getattr(self, item.name), dict)
                            else value) for item in fields(self)}

    @classmethod
    def from_json(cls, payload: Any) -> Counts:
        """The counts in ``payload``; a missing or mistyped figure takes its default (counts inform)."""
        payload = payload if isinstance(payload, dict) else {}
        values = {}
        for item in fields(cls):
            value = payload.get(item.name)
            if isinstance(value, dict):
                counts = {k: v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}
                values[item.name] = counts if item.metadata.get("kind") == BREAKDOWN else {
                    int(k): v for k, v in counts.items() if str(k).lstrip("-").isdigit()}
            elif isinstance(value, int) and not isinstance(value, bool):
                values[item.name] = value
        return cls(**values)

    def figures(self) -> dict[str, int]:
        """The scalar figures, for a line of text."""
        return {item.name: value for item in fields(self) if not isinstance(value := getattr(self, item.name), dict)}

    def histograms(self) -> list[Histogram]:
        """The histograms, with what their charts say (``histogram``'s metadata)."""
        return [Histogram(getattr(self, item.name), item.metadata["title"], item.metadata["size_label"],
                          item.metadata["count_label"])
                for item in fields(self) if item.metadata.get("kind") == HISTOGRAM]

    def breakdowns(self) -> dict[str, dict[str, int]]:
        """The breakdowns by their titles (``breakdown``'s metadata)."""
        return {item.metadata["title"]: getattr(self, item.name) for item in fields(self)
                if item.metadata.get("kind") == BREAKDOWN}


@dataclass(frozen=True)
class Histogram:
    """How many things have each size, with the words a chart of it needs."""

    values: dict[int, int]
    title: str
    size_label: str
    count_label: str


HISTOGRAM, BREAKDOWN = "histogram", "breakdown"


def histogram(title: str, size_label: str, count_label: str) -> Any:
    """A ``dict[int, int]`` counts field: how many ``count_label`` have each ``size_label``."""
    return field(default_factory=dict, metadata={"kind": HISTOGRAM, "title": title, "size_label": size_label,
                                                 "count_label": count_label})


def breakdown(title: str) -> Any:
    """A ``dict[str, int]`` counts field: a figure per name (tokens per language, say)."""
    return field(default_factory=dict, metadata={"kind": BREAKDOWN, "title": title})


@dataclass(frozen=True)
class PhaseResult:
    """What an element's work did: its counts, and the exit code of the element (the root
    phase records its own manifest; its code says whether it did)."""

    counts: Counts
    exit_code: int = 0
    complete: bool = True  # False: one step of the element's work is done, and it runs again (``Phase.passes``)


class Phase:
    """One phase of a run. Subclasses set the class attributes and implement ``elements`` and ``work``.

    ``needs`` names the phases whose elements this one reads, among those of the run (a
    phase that reads the output of whichever phase came last may name several);
    ``matching_elements`` says that element ``i`` reads element ``i`` of each of them (they
    share the curation shards), else it reads all their elements. ``noun`` names what one
    element's data is (``bucket_3.pairs``); ``added_by`` is the option that adds the phase
    to a run, for messages. ``passes`` is how many times one submission queues its elements,
    each window after the one before, for a phase whose element does one step a run (its
    work says ``complete=False`` until the last).
    """

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    noun: ClassVar[str] = "element"
    counts: ClassVar[type[Counts]] = Counts
    matching_elements: ClassVar[bool] = False
    added_by: ClassVar[str] = ""
    passes: ClassVar[int] = 1

    @property
    def is_root(self) -> bool:
        """The first phase: the spec's shards and manifests."""
        return not self.needs

    @property
    def element_noun(self) -> str:
        """How messages count its elements: shards when they are the run's shards."""
        return SHARD if self.noun == SHARD else "element"

    def layout_of(self, layout: CheckpointLayout) -> PhaseLayout:
        """Where this phase's records and data live in the checkpoint ``layout``."""
        return PhaseLayout(layout, self.name, self.noun)

    def elements(self, settings: Any, shards: ShardRange) -> ShardRange | None:
        """The phase's elements in a run with ``settings`` and ``shards``; None: not in this run."""
        raise NotImplementedError

    def check(self, settings: Any) -> None:
        """Refuse settings that cannot work, before any element of the run starts (at submit,
        and when a first-phase shard starts); by default every setting can."""

    def work(self, context: Any, index: int) -> PhaseResult:
        """Do element ``index``: its inputs are complete; return what it counted."""
        raise NotImplementedError

    def progress(self, records: Any, run_id: str | None, elements: int) -> str | None:
        """How far an incomplete phase of steps has gone in run ``run_id`` with ``elements``
        elements, from its records (its ``PhaseLayout``); None for a phase whose elements are
        done in one go."""
        return None

    def __repr__(self) -> str:
        return f"<phase {self.name}>"


@dataclass(frozen=True)
class PlannedPhase:
    """A phase of one run and its elements there."""

    phase: Phase
    elements: ShardRange

    @property
    def name(self) -> str:
        return self.phase.name


def needed(plan: list[PlannedPhase], phase: Phase) -> list[PlannedPhase]:
    """The phases of the run whose elements ``phase`` reads."""
    return [planned for planned in plan if planned.name in phase.needs]

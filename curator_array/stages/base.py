"""The stage API: what a user implements to add a step to a pipeline.

A stage turns one task into zero or more tasks. It declares what it needs (CPUs, GPUs)
and how it wants to be scaled (``ray_stage_spec``); the executor decides how that maps
onto Ray. Stages never import Ray, so they can be unit-tested as plain Python.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.errors import ConfigError
from .tasks import Task

if TYPE_CHECKING:
    import pyarrow as pa

    from .listing import Listing
    from .requirements import Requirement

SPEC_KEYS = frozenset(
    {
        "is_actor_stage",
        "num_workers",
        "num_workers_per_node",
        "scheduling_strategy",
        "per_node_slot",
        "bound_backlog",
        "max_tasks_in_flight_per_actor",
    }
)


@dataclass(frozen=True)
class Resources:
    """What one worker of a stage takes. ``memory_bytes`` is reserved per worker (Ray's
    ``memory`` resource): a node then runs no more of them than its memory holds (a model
    that each actor loads)."""

    cpus: float = 1.0
    gpus: float = 0.0
    memory_bytes: int = 0

    def __post_init__(self) -> None:
        if self.cpus < 0 or self.gpus < 0 or self.memory_bytes < 0:
            raise ConfigError(f"stage resources must be non-negative, got cpus={self.cpus}, gpus={self.gpus}, "
                              f"memory_bytes={self.memory_bytes}")

    def shares_workers_with(self, other: Resources) -> bool:
        """Whether stages needing these and ``other`` can run in one worker: the same CPUs and
        GPUs (the memory a model needs goes with the worker that loads it)."""
        return (self.cpus, self.gpus) == (other.cpus, other.gpus)


@dataclass(frozen=True)
class RayStageSpec:
    """How a stage wants to be scaled.

    ``num_workers`` is a fixed global pool; ``num_workers_per_node`` scales with the alive
    nodes (for I/O bound stages such as downloads). They are alternatives, never both.
    ``per_node_slot`` names a per-node custom resource each worker takes one unit of, for a
    hard per-node cap on clusters that define it. ``bound_backlog`` stops the stage from
    running ahead of the stage that consumes its outputs: at most a few outputs per worker
    of its pool may be started and not yet picked up by the consumer
    (``ray_data.BACKLOG_PER_WORKER``). ``max_tasks_in_flight_per_actor`` (actor stages)
    queues further inputs at each actor, which still runs one at a time but then never
    waits for the scheduler between inputs.
    """

    is_actor_stage: bool = False
    num_workers: int | None = None
    num_workers_per_node: float | None = None
    scheduling_strategy: str | None = None
    per_node_slot: str | None = None
    bound_backlog: bool = False
    max_tasks_in_flight_per_actor: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, stage_name: str, spec: Mapping[str, Any] | None) -> RayStageSpec:
        spec = dict(spec or {})
        unknown = sorted(set(spec) - SPEC_KEYS)
        if unknown:
            raise ConfigError(
                f"stage {stage_name!r}: unknown ray_stage_spec key(s) {', '.join(unknown)}; "
                f"known keys: {', '.join(sorted(SPEC_KEYS))}"
            )
        if spec.get("num_workers") is not None and spec.get("num_workers_per_node") is not None:
            raise ConfigError(
                f"stage {stage_name!r}: num_workers and num_workers_per_node conflict; "
                "give a fixed pool or a per-node count, not both"
            )
        workers = spec.get("num_workers")
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise ConfigError(f"stage {stage_name!r}: num_workers must be an integer >= 1, got {workers!r}")
        per_node = spec.get("num_workers_per_node")
        if per_node is not None and (
            isinstance(per_node, bool) or not isinstance(per_node, (int, float)) or per_node <= 0
        ):
            raise ConfigError(
                f"stage {stage_name!r}: num_workers_per_node must be a number > 0, got {per_node!r}"
            )
        in_flight = spec.get("max_tasks_in_flight_per_actor", 1)
        if isinstance(in_flight, bool) or not isinstance(in_flight, int) or in_flight < 1:
            raise ConfigError(
                f"stage {stage_name!r}: max_tasks_in_flight_per_actor must be an integer >= 1, got {in_flight!r}"
            )
        return cls(
            is_actor_stage=bool(spec.get("is_actor_stage", False)),
            num_workers=workers,
            num_workers_per_node=per_node,
            scheduling_strategy=spec.get("scheduling_strategy"),
            per_node_slot=spec.get("per_node_slot"),
            bound_backlog=bool(spec.get("bound_backlog", False)),
            max_tasks_in_flight_per_actor=in_flight,
        )


# Attributes that say how a stage is executed, not what it computes: never in a fingerprint.
EXECUTION_ATTRIBUTES = frozenset({"ray_stage_spec", "resources", "batch_size"})


def _plain(value: Any) -> bool:
    """JSON-plain values (what a fingerprint can hold and compare); paths are not."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _as_json(value: Any) -> Any:
    """Settings objects (dataclasses) as their ``to_json`` (else their fields), tuples as
    lists: the form run.json keeps."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _as_json(value.to_json() if hasattr(value, "to_json") else dataclasses.asdict(value))
    if isinstance(value, (list, tuple)):
        return [_as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    return value


def stage_parameters(stage: Any) -> dict[str, Any]:
    """A stage's public, JSON-plain attributes: how a stage that declares nothing is pinned.

    Paths are left out on purpose: the same run may see its data under other mount points
    (a container, another login node), and that must not count as another pipeline.
    """
    params: dict[str, Any] = {}
    for key, value in sorted(vars(stage).items()):
        if key.startswith("_") or key in EXECUTION_ATTRIBUTES or isinstance(value, os.PathLike):
            continue
        value = _as_json(value)
        if _plain(value):
            params[key] = value
    return params


class _Stage:
    """What every stage has: a name, what it computes with, and the columns it reads and writes.

    ``pinned`` names the attributes that decide its output: the run contract pins them
    (``run.json``), so another value is another pipeline. Attributes that change no output
    byte (retries, timeouts, paths) are left out. ``pinned_unless`` holds those pinned only
    when they differ from the value given: a setting added after runs were pinned without
    it, whose usual value keeps those runs the same run. ``pinned`` is not inherited: a
    subclass may add what it computes with, so a class that declares nothing itself is
    pinned by its public attributes (``stage_parameters``).
    """

    name: ClassVar[str] = ""
    pinned: ClassVar[tuple[str, ...] | None] = None
    pinned_unless: ClassVar[Mapping[str, Any]] = {}

    @property
    def stage_name(self) -> str:
        return self.name or type(self).__name__

    def pinned_settings(self) -> dict[str, Any]:
        """The values ``pinned`` and ``pinned_unless`` name, as ``run.json`` keeps them."""
        pinned = vars(type(self)).get("pinned")
        if pinned is None:
            return stage_parameters(self)
        chosen = {name: _as_json(getattr(self, name)) for name in pinned}
        chosen.update({name: _as_json(getattr(self, name)) for name, usual in self.pinned_unless.items()
                       if getattr(self, name) != usual})
        return dict(sorted(chosen.items()))

    def fingerprint(self) -> dict[str, Any]:
        cls = type(self)
        return {"name": self.stage_name, "class": f"{cls.__module__}.{cls.__qualname__}",
                "params": self.pinned_settings()}


class ProcessingStage(_Stage):
    """Base class of every non-source stage.

    Subclasses override ``process`` (one task in, a task, a list of tasks or None out) or,
    for vectorised work, ``process_batch``. Actor stages get ``setup`` called once per
    worker before any task; state a stage needs in every worker process (a model, a
    sandbox, lists) is a ``process_state.PerProcess`` attribute, made once per process and
    never sent with the stage.

    ``reads()`` and ``writes()`` declare the columns it reads and the columns it adds or
    changes (None: it cannot know, a reader of JSON, say); a pipeline whose stage reads a
    column that the declared stages before it never write is refused when it is built.
    ``needs()`` names what must be installed for it to run (``Requirement``), checked before
    a run starts.
    """

    resources: Resources = Resources()
    batch_size: int = 1
    drops_rows: ClassVar[bool] = False  # hands what it drops to ``removed.removed_rows`` (--keep-removed)
    keep_removed: bool = False  # set on a stage that drops rows when the run keeps them
    annotate: bool = False  # set on a stage that drops rows when the run marks them instead (--annotate)
    pinned_unless: ClassVar[Mapping[str, Any]] = {"keep_removed": False, "annotate": False}
    ray_stage_spec: Mapping[str, Any] = {}
    # Decides a row by the others of its task (exact dedup): no task of its run is cut, and
    # with --annotate a filter compares the unmarked rows only.
    compares_rows: ClassVar[bool] = False

    def __init__(self) -> None:
        self.validate()

    def validate(self) -> RayStageSpec:
        if self.batch_size < 1:
            raise ConfigError(f"stage {self.stage_name!r}: batch_size must be >= 1")
        return RayStageSpec.from_mapping(self.stage_name, self.ray_stage_spec)

    def reads(self) -> tuple[str, ...]:
        """The columns it reads."""
        return ()

    def needs(self) -> tuple[Requirement, ...]:
        """What must be installed for it to run (checked before a run's cluster starts)."""
        return ()

    def writes(self) -> tuple[str, ...] | None:
        """The columns it adds or changes; None when they depend on the data."""
        return ()

    def setup(self) -> None:
        """Called once per worker before processing; override to load per-process state early."""

    def keep_columns(self, columns: tuple[str, ...]) -> None:
        """Keep ``columns`` too, for a stage that chooses the columns written (an annotated
        run's marks and the measures its rules add); others keep every column already."""

    def output_bytes(self, task: Task) -> int | None:
        """The bytes its output for ``task`` will hold, when known before it runs (a download
        of listed objects); the executor sizes the next stage's share of work by it."""
        return None

    def most_cuts(self, task: Task, finer: int = 1) -> int:
        """Into how many parts this stage, the first, can cut ``task`` for several workers to
        share (``cut``); 1: it cannot. ``finer`` lowers the stage's smallest part that many times."""
        return 1

    def cut(self, task: Task, parts: int) -> list[Task]:
        """``task`` as ``parts`` tasks that together do its work (at most ``most_cuts``)."""
        return [task]

    def process(self, task: Task) -> Task | list[Task] | None:
        raise NotImplementedError(f"{type(self).__name__} must implement process()")

    def finish(self) -> list[Task]:
        """Outputs it held back, at the end of a block of work (a writer's open files)."""
        return []

    def cpu_elsewhere_s(self) -> float:
        """CPU time this stage has had other processes spend for it so far (child processes
        it runs the work in); the stage meter adds it to the stage's own."""
        return 0.0

    def process_batch(self, tasks: list[Task]) -> list[Task]:
        out: list[Task] = []
        for task in tasks:
            result = self.process(task)
            if result is None:
                continue
            out.extend(result if isinstance(result, list) else [result])
        return out


class SourceStage(_Stage):
    """The first stage: lists every source task of the run, deterministically, at the driver.

    Every array element lists the full set and keeps its own shard, so ids must be the same
    in every process and on every retry.
    """

    def list_tasks(self) -> list[Task]:
        raise NotImplementedError


class FreezableSource(SourceStage):
    """A source whose listing can be frozen with the run: files under ``input_dir`` (a
    directory, or an object store's prefix).

    The first start of a run walks the tree once (``snapshot``) and saves the listing in
    the checkpoint; every later start reads it and builds its own tasks from its rows
    (``tasks_from``), checking only its own files (``changed_files``). Other sources list
    every time.
    """

    input_dir: Path | str

    def snapshot(self) -> Listing:
        raise NotImplementedError

    def tasks_from(self, rows: pa.Table) -> list[Task]:
        raise NotImplementedError

    def location(self, relative: str) -> str:
        """Where a listed file is (the listing holds paths relative to ``input_dir``)."""
        return str(Path(self.input_dir) / relative)

    def relative(self, location: str) -> str:
        return os.path.relpath(location, self.input_dir)

    def changed_files(self, recorded: list[tuple[str, int, int]]) -> list:
        """Those of ``recorded`` (location, size, mtime) that are gone or differ now."""
        from .listing import changed_files

        return changed_files(recorded)

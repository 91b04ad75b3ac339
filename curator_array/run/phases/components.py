"""Dedup, phase 3 over N elements (``--dedup-components-elements N``): the clusters in rounds.

When one clusters element cannot hold every pair, N elements find the connected
components together, a step at a time (``dedup.rounds``: large-star and small-star steps),
each holding 1/N of the edges. A step is one run of every element; an element's step has
its own manifest, and its edges for the next step go to one file per element::

    .phases/components/step_<r>/completed_<k>.json       element k did step r
    .phases/components/data/step_<r>/to_<j>/from_<k>.pairs   its edges for element j
    .phases/components/data/step_<r>/labels/element_<k>/shard_<s>.parquet

An element does the first step it has not done, once every element has done the one
before (else it exits 2, like any element whose inputs are incomplete). A large-star step
in which no element found an unsettled node is final: its labels are the clusters, the same
whatever N is, and the element that sees it writes every element's completion manifest.
One submission queues the elements ``passes`` times, each window after the one before;
the element that completes the phase cancels the windows still pending
(``run.element.release_unused_windows``), and a run that needs more steps is continued by ``retry --submit`` from the first incomplete step.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.counts import Counts
from ...core.layout import PhaseLayout, utc_now
from ...core.phase import Phase, PhaseResult, PhaseSettings
from ...core.records.phase import PhaseManifest, phase_manifests
from ...core.sharding import ShardRange
from ..lifecycle import InputsIncomplete, refuse_beyond_memory
from .clusters import BYTES_PER_PAIR_IN_ROUNDS, by_shard, cluster_sizes_field, streamed_pairs
from .layouts import BUCKETS, COMPONENTS, CuratedFiles, pairs_file
from .signatures import DEDUP, whole_documents

if TYPE_CHECKING:
    import pyarrow as pa

    from ...core.layout import CheckpointLayout
    from ...dedup.rounds import Labels
    from ..lifecycle import PhaseContext

STEPS_QUEUED = 16  # windows one submission queues: the 10-million-document bench converges in 11 steps


@dataclass(frozen=True)
class StepCounts(Counts):
    """One element's step: edges read and written (both directions), whether it checked for
    unsettled nodes (large-star steps) and found any, and, when it labelled its stars, what
    the phase counts."""

    edges_in: int = 0
    edges_out: int = 0
    checked: int = 0
    unsettled: int = 0
    removed: int = 0
    clusters: int = 0
    cluster_sizes: dict[int, int] = cluster_sizes_field()


@dataclass(frozen=True)
class ComponentCounts(Counts):
    steps: int = 0  # counted by element 0
    edges: int = 0  # held in the first step, both directions of each pair
    removed: int = 0
    clusters: int = 0
    cluster_sizes: dict[int, int] = cluster_sizes_field()


class Step(Phase):
    """The records of one step: to the record layer, a phase of its own under the components'."""

    counts = StepCounts

    def __init__(self, number: int):
        self.number = number
        self.name = f"components/step_{number}"  # type: ignore[misc]


class Components(Phase):
    name = COMPONENTS
    needs = (BUCKETS,)
    counts = ComponentCounts
    passes = STEPS_QUEUED
    settings_key = DEDUP

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        dedup = whole_documents(settings)
        return ShardRange(dedup.components_elements) if dedup is not None and dedup.components_elements > 1 else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        steps = StepRecords(context.layout, context.run.run_id, context.elements(self.name).total)
        if steps.final() is None:
            self._step(context, steps, index)
            if steps.final() is None:
                return PhaseResult(ComponentCounts(), complete=False)
        return PhaseResult(steps.finish(context, index))

    def _step(self, context: PhaseContext, steps: StepRecords, index: int) -> None:
        """Element ``index``'s next step, its edges for the next written and its manifest last."""
        from ...dedup.rounds import run_step

        step = steps.next_for(index)
        context.tick(step, 0)
        started, clock = utc_now(), time.monotonic()
        result = run_step(step, self._edges(context, steps, step, index), steps.elements,
                          lambda target: steps.output(step, target, index), context.run.run_id)
        counts = StepCounts(result.edges_in, result.edges_out, int(result.unsettled is not None),
                            result.unsettled or 0)
        if result.labels is not None:
            counts = write_labels(context, steps, step, index, result.labels, counts)
        steps.record(context, step, index, counts, started, clock)
        if step:  # read for good: a step with a manifest is never done again
            steps.drop_edges(step - 1, index)

    def _edges(self, context: PhaseContext, steps: StepRecords, step: int, index: int) -> Callable:
        """What reads the step's edges: the candidate pairs in this element's partition at the
        first step (refused first if its share cannot fit), the edges sent to it after."""
        from ...dedup.rounds import first_edges, step_edges

        run_id = context.run.run_id
        if step:
            return partial(step_edges, steps.inputs(step, index), run_id)
        pairs = sum(m.counts.pairs for m in context.manifests(BUCKETS).values())
        refuse_beyond_memory(f"{self.name} {index}", pairs // steps.elements, "duplicate pairs (its share)",
                             BYTES_PER_PAIR_IN_ROUNDS, context.memory_limit_mb(),
                             f"share them among more elements (--dedup-components-elements {steps.elements * 2})")
        paths = [pairs_file(context.layout, b) for b in context.elements(BUCKETS)]
        return partial(first_edges, streamed_pairs(paths, pairs, run_id, context.tick), index, steps.elements)

    def progress(self, records: PhaseLayout, run_id: str | None, elements: int) -> str | None:
        from ...core.arrays import format_array_expression
        from ...dedup.rounds import step_kind

        steps = StepRecords(records.layout, run_id, elements)
        final = steps.final()
        if final is not None:
            return f"final at step {final}; its elements' manifests are not all written"
        step = steps.first_incomplete()
        done = steps.done(step)
        if not done and step == 0:
            return None
        waiting = [i for i in range(elements) if i not in done]
        return (f"step {step} ({step_kind(step)}): {len(done)}/{elements} done, "
                f"waits for element(s) {format_array_expression(waiting)}")


class StepRecords:
    """The components phase's steps in one checkpoint, as their manifests show them."""

    def __init__(self, layout: CheckpointLayout, run_id: str | None, elements: int):
        self.layout, self.run_id, self.elements = layout, run_id, elements
        self.data = PhaseLayout(layout, COMPONENTS).data_dir
        self._known: dict[int, dict[int, PhaseManifest]] = {}

    def done(self, step: int) -> dict[int, PhaseManifest]:
        """The elements that did ``step`` (read again until all have)."""
        if len(self._known.get(step, {})) < self.elements:
            self._known[step] = phase_manifests(Step(step).layout_of(self.layout), self.run_id, StepCounts)
        return self._known[step]

    def complete(self, step: int) -> bool:
        return len(self.done(step)) == self.elements

    def first_incomplete(self) -> int:
        step = 0
        while self.complete(step):
            step += 1
        return step

    def final(self) -> int | None:
        """The large-star step no element found unsettled, once every element has done it."""
        step = 0
        while self.complete(step):
            counts = [m.counts for m in self.done(step).values()]
            if all(c.checked for c in counts) and not any(c.unsettled for c in counts):
                return step
            step += 1
        return None

    def next_for(self, index: int) -> int:
        """The step element ``index`` does now; refused while the one before is incomplete."""
        step = 0
        while index in self.done(step):
            step += 1
        if step and not self.complete(step - 1):
            from ...core.arrays import format_array_expression

            missing = [i for i in range(self.elements) if i not in self.done(step - 1)]
            raise InputsIncomplete(
                f"components element {index} cannot start step {step}: step {step - 1} of element(s) "
                f"{format_array_expression(missing)} is not complete; curator-array retry --submit continues the run")
        return step

    def step_dir(self, step: int) -> Path:
        return self.data / f"step_{step}"

    def output(self, step: int, target: int, index: int) -> Path:
        return self.step_dir(step) / f"to_{target}" / f"from_{index}.pairs"

    def inputs(self, step: int, index: int) -> list[Path]:
        return [self.output(step - 1, index, source) for source in range(self.elements)]

    def drop_edges(self, step: int, target: int) -> None:
        """Remove the edges ``step`` sent to element ``target``, once nothing reads them again."""
        shutil.rmtree(self.step_dir(step) / f"to_{target}", ignore_errors=True)
        with contextlib.suppress(OSError):
            self.step_dir(step).rmdir()  # when no labels and no other element's edges are left

    def labels(self, step: int, index: int, shard: int) -> Path:
        return self.step_dir(step) / "labels" / f"element_{index}" / f"shard_{shard}.parquet"

    def record(self, context: PhaseContext, step: int, index: int, counts: StepCounts, started: str,
               clock: float) -> None:
        manifest = context.finished(Step(step), index, self.elements, counts, started, clock)
        manifest.write(Step(step).layout_of(self.layout))
        self._known.setdefault(step, {})[index] = manifest

    def finish(self, context: PhaseContext, index: int) -> ComponentCounts:
        """Every element's completion manifest of a final run (each from its own records, so
        whichever element writes them writes the same), and this element's counts."""
        final = self.final()
        first = self.done(0)
        for target in range(self.elements):  # the final step's edges go nowhere
            self.drop_edges(final, target)
        counts = {}
        for element, manifest in self.done(final).items():
            step = manifest.counts
            counts[element] = ComponentCounts(final + 1 if element == 0 else 0, first[element].counts.edges_in,
                                              step.removed, step.clusters, step.cluster_sizes)
            if element != index:
                completed = replace(manifest, phase=COMPONENTS, counts=counts[element])
                completed.write(PhaseLayout(self.layout, COMPONENTS))
                context.manifests(COMPONENTS)[element] = completed
                context.complete(context.phase(COMPONENTS)).add(element)
        return counts[index]


def write_labels(context: PhaseContext, steps: StepRecords, step: int, index: int, labels: Labels,
                 counts: StepCounts) -> StepCounts:
    """The stars centred in this element's partition, one file per curation shard (each
    document of this run in a cluster: its identity, the copy kept, the size), and what
    they count."""
    import numpy as np
    import pyarrow as pa

    from ...dedup.clusters import size_histogram
    from ...formats.parquet import write_parquet

    shards = context.run.shards
    ours, order, bounds = by_shard(labels.nodes, CuratedFiles.of(context.layout, shards).shards, shards)
    for shard, start, stop in zip(shards, bounds[1:-1], bounds[2:]):
        chosen = order[start:stop]
        write_parquet(pa.table({"id": labels.nodes[chosen], "kept": labels.kept[chosen],
                                "size": labels.sizes[chosen].astype(np.int32)}), steps.labels(step, index, shard))
    centres = labels.nodes == labels.kept
    return replace(counts, removed=int(np.count_nonzero(ours & ~centres)), clusters=int(np.count_nonzero(centres)),
                   cluster_sizes=size_histogram(labels.sizes[centres]))


def shard_labels(context: PhaseContext, shard: int) -> pa.Table:
    """Shard ``shard``'s documents in a cluster from the final step's labels, by identity:
    the table a clusters element writes for it."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    elements = context.elements(COMPONENTS).total
    steps = StepRecords(context.layout, context.run.run_id, elements)
    final = steps.final()
    table = pa.concat_tables([pq.ParquetFile(steps.labels(final, element, shard)).read() for element in range(elements)])
    return table.take(pc.sort_indices(table, [("id", "ascending")]))

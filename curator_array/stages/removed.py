"""Dropped documents, kept when a run asks for them (``--keep-removed``).

FineWeb wrote what each step dropped next to what it kept, so a reader can see what a rule
costs. A stage that drops rows hands them to ``removed_rows``; when the stage keeps removed
rows they travel on the batch, by step (the rule's prefix: ``gopher_quality`` for
``gopher_quality.stop_words``), each row with the rule that dropped it (``removed_by``). The
writer writes every step's rows of a task into the task's own removed files (one file, not
one per step: each file is metadata work for a parallel file system), with the output's
names: a retried task rewrites them and never adds a second copy. They are not the run's
output, so no later phase reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from .tasks import DocumentBatch

REASON_FIELD = "removed_by"


def removed_rows(stage, task: DocumentBatch, table: pa.Table, kept: pa.Array,
                 reasons: Sequence[str | None]) -> DocumentBatch:
    """``task`` holding the rows of ``table`` that ``kept`` keeps; the others, with their
    ``reasons`` (per row, the counter that counted it: ``<stage>.<rule>``), ride along on the
    task when ``stage.keep_removed``; with ``stage.annotate`` every row stays, the dropped
    ones marked (``annotations``)."""
    if stage.annotate:
        from .annotations import mark

        return mark(stage.stage_name, task, table, reasons)
    if not stage.keep_removed:
        return replace(task, table=table.filter(kept))
    dropped = pc.invert(kept)
    gone = table.filter(dropped)
    if gone.num_rows == 0:
        return replace(task, table=table.filter(kept))
    why = [reason for reason, drop in zip(reasons, dropped.to_pylist()) if drop]
    gone = gone.append_column(REASON_FIELD, pa.array(why, pa.string()))
    steps = [reason.partition(".")[0] for reason in why]
    removed = dict(task.removed)
    for step in dict.fromkeys(steps):
        rows = gone.filter(pa.array([s == step for s in steps]))
        earlier = removed.get(step)
        removed[step] = rows if earlier is None else pa.concat_tables([earlier, rows], promote_options="permissive")
    return replace(task, table=table.filter(kept), removed=removed)

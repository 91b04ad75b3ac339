"""Marking instead of dropping (``--annotate``): a run that decides once and selects later.

With ``--annotate`` every stage that drops rows keeps them and marks them instead: each
document carries ``would_drop``, the first rule (as ``<step>.<rule>``, the key a plain run
counts the drop under) that would have dropped it, or null, and ``would_drop_all``, every rule
that would have, in pipeline order. A rule that compares documents with each other (exact
dedup within a task) looks only at the documents no earlier rule marked, so the first-rule
counts are a plain run's drop counts; every other rule looks at every document. Text edits
(line modifiers, decontamination's cut) still apply.

The counts: ``dropped`` keeps a plain run's meaning (each document under its first rule), and
the ``would_drop_any`` tally counts each rule over every document it rejects.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa

from .columns import taken_field
from .tasks import DocumentBatch, Task

FIRST_FIELD = "would_drop"
ALL_FIELD = "would_drop_all"
FIELDS = (FIRST_FIELD, ALL_FIELD)
MARKED = "annotated"  # the task metadata key saying the columns are ours, not the input's


def clashing(task: DocumentBatch, stage: str) -> Task | None:
    """The task failed, when its input has a field named as one of ours (before any stage
    marked it, the field is the input's)."""
    if task.metadata.get(MARKED):
        return None
    return taken_field(task, FIELDS, stage, ", which --annotate writes: rename or drop the field")


def unmarked(table: pa.Table) -> pa.Array | None:
    """Which rows no earlier rule marked (None: no rule has marked any)."""
    import pyarrow.compute as pc

    if FIRST_FIELD not in table.column_names:
        return None
    return pc.is_null(table.column(FIRST_FIELD)).combine_chunks()


def mark(stage: str, task: DocumentBatch, table: pa.Table, reasons: Sequence[str | None],
         every: Sequence[Sequence[str]] | None = None) -> Task:
    """``task`` holding every row of ``table``, the rows with a reason marked (failed when
    the input has one of the fields, ``clashing``).

    ``reasons``: per row, the rule this stage counted it under (its first), or None;
    ``every``: per row, every rule of this stage that rejects it (default: its reason). The
    stage counted each reason in ``task.counters.dropped``; a row an earlier stage marked is
    taken back out of those counts, as a plain run never showed it to this stage."""
    clash = clashing(task, stage)
    if clash is not None:
        return clash
    rows = table.num_rows
    first = table.column(FIRST_FIELD).to_pylist() if FIRST_FIELD in table.column_names else [None] * rows
    rejected = table.column(ALL_FIELD).to_pylist() if ALL_FIELD in table.column_names else [None] * rows
    counters, any_rule = task.counters, Counter()
    for row in range(rows):
        found = list(every[row]) if every is not None else ([reasons[row]] if reasons[row] else [])
        if not found:
            continue
        if first[row] is None:
            first[row] = reasons[row] or found[0]
        elif reasons[row]:
            counters = counters.with_dropped(reasons[row], -1)
        rejected[row] = (rejected[row] or []) + found
        any_rule.update(found)
    columns = {FIRST_FIELD: pa.array(first, pa.string()),
               ALL_FIELD: pa.array([r or [] for r in rejected], pa.list_(pa.string()))}
    for name, column in columns.items():
        table = (table.set_column(table.schema.get_field_index(name), name, column) if name in table.column_names
                 else table.append_column(name, column))
    return replace(task, table=table, counters=counters.with_tally("would_drop_any", dict(any_rule)),
                   metadata={**task.metadata, MARKED: True})

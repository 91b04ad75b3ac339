"""Document filters over Arrow tables, ``FilterStage`` (the base user filters subclass), and
the default pipeline's own filters, each with the run options that switch it on.

A filter decides per row, vectorised over the batch's table. The base class does the
bookkeeping: empty batches, a missing or non-text field (the task fails naming it), and
counting the rows it dropped, which end up in the completion manifest per filter.

A filter of the default pipeline declares its run options (``options``) and builds itself
from their values (``from_options``); the default pipeline's filter list
(``pipelines.filters``) gathers them, and the run's option table shows them. pyarrow is
imported when a batch is filtered, so the option table stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.errors import ConfigError
from ..core.options import RunOption
from .base import ProcessingStage
from .columns import missing_field
from .defaults import TEXT_FIELD
from .tasks import DocumentBatch, Task

if TYPE_CHECKING:
    import pyarrow as pa

    Mask = pa.Array | pa.ChunkedArray


class FilterStage(ProcessingStage):
    """Keeps the rows of a ``DocumentBatch`` that ``keep`` accepts; counts the others.

    Override ``keep(text)`` to decide from the text column alone, or ``score(table, text)``
    to add columns (scores worth keeping for later analysis) and decide from the whole
    table. ``score`` may return one mask or, for a filter made of several rules, a dict of
    rule name → mask: a row is dropped by the first rule that rejects it and counted as
    ``<stage>.<rule>``. A filter that runs several named rule sets names its rules
    ``<rule set>.<rule>`` itself (a rule name with a dot is counted as it is). A null in a
    mask drops the row.
    """

    drops_rows = True
    options: ClassVar[tuple[RunOption, ...]] = ()  # the run options that build it in the default pipeline

    def __init__(self, text_field: str = TEXT_FIELD):
        self.text_field = text_field
        super().__init__()

    @classmethod
    def from_options(cls, values: Mapping[str, Any], text_field: str) -> FilterStage | None:
        """The filter the values of its ``options`` ask for, or None when they leave it off."""
        return None

    def reads(self) -> tuple[str, ...]:
        return (self.text_field,)

    def keep(self, text: pa.ChunkedArray) -> Mask:
        raise NotImplementedError(f"{type(self).__name__} must implement keep() or score()")

    def score(self, table: pa.Table, text: pa.ChunkedArray) -> tuple[pa.Table, Mask | dict[str, Mask]]:
        """The table to keep rows of (with any added columns) and the mask, or a mask per rule."""
        return table, self.keep(text)

    def process(self, task: DocumentBatch) -> Task:
        import pyarrow as pa

        table = task.table
        if table.num_rows == 0:
            return task
        missing = missing_field(task, self.text_field, self.stage_name)
        if missing is not None:
            return missing
        text = table.column(self.text_field)
        if pa.types.is_null(text.type):
            text = text.cast(pa.string())
        if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
            return task.failed(f"field {self.text_field!r} has type {text.type}, expected strings", self.stage_name)
        if self.annotate and self.compares_rows:
            return self._score_unmarked(task, table, text)
        scored, masks = self.score(table, text)
        return self.apply_masks(task, scored, masks)

    def _score_unmarked(self, task: DocumentBatch, table: pa.Table, text: pa.ChunkedArray) -> Task:
        """Scored as if the rows an earlier rule marked were gone (they pass here)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from .annotations import clashing, unmarked

        clash = clashing(task, self.stage_name)
        alive = None if clash is not None else unmarked(table)
        if clash is not None or alive is None:
            return clash or self.apply_masks(task, *self.score(table, text))
        scored, masks = self.score(table.filter(alive), text.filter(alive))
        if scored.column_names != table.column_names:
            raise TypeError(f"{self.stage_name}: a filter that compares rows adds no columns")
        rows = np.flatnonzero(alive.to_numpy(zero_copy_only=False))

        def widened(mask):
            if isinstance(mask, pa.ChunkedArray):
                mask = mask.combine_chunks()
            full = np.ones(table.num_rows, bool)
            full[rows] = (pc.fill_null(mask, False).to_numpy(zero_copy_only=False) if isinstance(mask, pa.Array)
                          else np.asarray(mask, bool))
            return pa.array(full)

        masks = {rule: widened(m) for rule, m in masks.items()} if isinstance(masks, dict) else widened(masks)
        return self.apply_masks(task, table, masks)

    def apply_masks(self, task: DocumentBatch, scored: pa.Table, masks: Mask | dict[str, Mask],
                    counters=None) -> Task:
        """``scored``'s rows that every mask keeps, each drop counted under the first rule
        that made it (``counters``: the task's, unless the caller added to them)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from .removed import removed_rows

        table = task.table
        if not isinstance(masks, dict):
            masks = {"": masks}
        counters = counters or task.counters
        keep = pa.array([True] * table.num_rows)
        reasons: list[str | None] = [None] * table.num_rows if self.keep_removed else []
        if self.annotate:
            reasons = [None] * table.num_rows
        every: list[list[str]] = [[] for _ in range(table.num_rows)] if self.annotate else []
        for rule, mask in masks.items():
            passed = pc.fill_null(mask, False)
            dropped = pc.and_(keep, pc.invert(passed))
            dropped_here = pc.sum(dropped).as_py() or 0
            keep = pc.and_(keep, passed)
            key = rule if "." in rule else f"{self.stage_name}.{rule}" if rule else self.stage_name
            counters = counters.with_dropped(key, dropped_here)
            if reasons and dropped_here:
                for row in np.flatnonzero(dropped.to_numpy(zero_copy_only=False)):
                    reasons[row] = key
            if self.annotate:
                for row in np.flatnonzero(pc.invert(passed).to_numpy(zero_copy_only=False)):
                    every[row].append(key)
        if self.annotate:
            from .annotations import mark

            return mark(self.stage_name, replace(task, counters=counters), scored, reasons, every)
        return removed_rows(self, replace(task, counters=counters), scored, keep, reasons)


class NonEmptyTextFilter(FilterStage):
    """Drops documents whose text is missing or only whitespace."""

    name = "non_empty_text"
    pinned = ("text_field",)
    options = (RunOption("drop_empty", "Drop documents with empty or missing text.", "flag", "filters", default=False),)

    @classmethod
    def from_options(cls, values, text_field):
        return cls(text_field) if values.get("drop_empty") else None

    def keep(self, text):
        import pyarrow.compute as pc

        return pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0)


class WordCountFilter(FilterStage):
    """Keeps documents with ``min_words <= words <= max_words`` (whitespace-separated)."""

    name = "word_count"
    pinned = ("max_words", "min_words", "text_field")
    options = (
        RunOption("min_words", "Drop documents with fewer words.", "int", "filters", minimum=0),
        RunOption("max_words", "Drop documents with more words.", "int", "filters", minimum=0),
    )

    def __init__(self, min_words: int | None = None, max_words: int | None = None, text_field: str = TEXT_FIELD):
        if min_words is None and max_words is None:
            raise ConfigError("word-count filter needs a minimum, a maximum or both")
        if min_words is not None and max_words is not None and min_words > max_words:
            raise ConfigError(f"word-count bounds are inverted: min {min_words} > max {max_words}")
        self.min_words, self.max_words = min_words, max_words
        super().__init__(text_field)

    @classmethod
    def from_options(cls, values, text_field):
        low, high = values.get("min_words"), values.get("max_words")
        return cls(low, high, text_field) if low is not None or high is not None else None

    def keep(self, text):
        import pyarrow.compute as pc

        from .whitespace import count_words

        words = count_words(text)
        mask = pc.greater_equal(words, self.min_words or 0)
        if self.max_words is not None:
            mask = pc.and_(mask, pc.less_equal(words, self.max_words))
        return mask


class ExactDuplicateFilter(FilterStage):
    """Keeps the first occurrence of each exact text within a source task.

    Scoped to one source task on purpose: the result then does not depend on how tasks
    are spread over shards, so the union of all shards equals an unsharded run.
    """

    name = "exact_dedup"
    pinned = ("text_field",)
    compares_rows = True
    options = (RunOption("dedup_within_task", "Drop exact duplicate texts within each source task (no dedup phases).",
                         "flag", "filters", default=False),)

    @classmethod
    def from_options(cls, values, text_field):
        return cls(text_field) if values.get("dedup_within_task") else None

    def keep(self, text):
        import pyarrow as pa
        import pyarrow.compute as pc

        indexed = pa.table({"t": text, "i": pa.array(range(len(text)), pa.int64())})
        firsts = indexed.group_by("t", use_threads=False).aggregate([("i", "min")]).column("i_min")
        return pc.is_in(indexed.column("i"), value_set=firsts)

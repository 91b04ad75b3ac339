"""Document filters over Arrow tables. Each records how many rows it dropped."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from ..tasks import DocumentBatch, FailedTask, Task
from .base import ProcessingStage


class _TableFilter(ProcessingStage):
    def __init__(self, text_field: str = "text"):
        self.text_field = text_field
        super().__init__()

    def keep_mask(self, text: pa.ChunkedArray) -> pa.Array:
        raise NotImplementedError

    def process(self, task: DocumentBatch) -> Task:
        table = task.table
        if table.num_rows == 0:
            return task
        if self.text_field not in table.column_names:
            return FailedTask(task.task_id, dict(task.metadata), stage=self.stage_name,
                              reason=f"no {self.text_field!r} field in {', '.join(task.metadata.get('source_files', [])) or 'input'}")
        text = table.column(self.text_field)
        if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type) or pa.types.is_null(text.type)):
            return FailedTask(task.task_id, dict(task.metadata), stage=self.stage_name,
                              reason=f"field {self.text_field!r} has type {text.type}, expected strings")
        kept = table.filter(self.keep_mask(text))
        dropped = dict(task.metadata.get("dropped", {}))
        dropped[self.stage_name] = table.num_rows - kept.num_rows
        return DocumentBatch(task.task_id, {**task.metadata, "dropped": dropped}, table=kept)


class NonEmptyTextFilter(_TableFilter):
    """Drops documents whose text is missing or only whitespace."""

    name = "non_empty_text"

    def keep_mask(self, text):
        stripped = pc.utf8_trim_whitespace(text.cast(pa.string()))
        return pc.fill_null(pc.greater(pc.utf8_length(stripped), 0), False)


class WordCountFilter(_TableFilter):
    """Keeps documents with ``min_words <= words <= max_words`` (whitespace-separated)."""

    name = "word_count"

    def __init__(self, min_words: int | None = None, max_words: int | None = None, text_field: str = "text"):
        if min_words is None and max_words is None:
            raise ConfigError("word-count filter needs a minimum, a maximum or both")
        if min_words is not None and max_words is not None and min_words > max_words:
            raise ConfigError(f"word-count bounds are inverted: min {min_words} > max {max_words}")
        self.min_words, self.max_words = min_words, max_words
        super().__init__(text_field)

    def keep_mask(self, text):
        words = pc.list_value_length(pc.utf8_split_whitespace(text.cast(pa.string())))
        words = pc.fill_null(words, 0)
        mask = pc.greater_equal(words, self.min_words or 0)
        if self.max_words is not None:
            mask = pc.and_(mask, pc.less_equal(words, self.max_words))
        return mask


class ExactDuplicateFilter(_TableFilter):
    """Keeps the first occurrence of each exact text within a source task.

    Scoped to one source task on purpose: the result then does not depend on how tasks
    are spread over shards, so the union of all shards equals an unsharded run.
    """

    name = "exact_dedup"

    def keep_mask(self, text):
        indexed = pa.table({"t": text, "i": pa.array(range(len(text)), pa.int64())})
        firsts = indexed.group_by("t", use_threads=False).aggregate([("i", "min")]).column("i_min")
        return pc.is_in(indexed.column("i"), value_set=firsts)

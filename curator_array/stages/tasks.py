"""The units of work that flow between stages.

Every task keeps the id of the source task it came from, so a failure anywhere downstream
can be traced to the shard that must be rerun, and writers can name outputs from it.
Counts that the runner records in the completion manifest travel as typed
``TaskCounters`` on the task, never as free-form metadata keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.records.contamination import Contamination
from ..core.records.shard import StageTime, add_stage_times
from ..core.tallies import Tallies

if TYPE_CHECKING:
    import pyarrow as pa


def _empty_table() -> pa.Table:
    """An empty batch; pyarrow is imported when a batch is made, not with the stage API."""
    import pyarrow as pa

    return pa.table({})


@dataclass(frozen=True)
class TaskCounters:
    """What happened to one source task's rows on their way through the stages.

    ``dropped`` maps a stage name to the rows it removed; ``skipped`` maps a reason
    (``malformed_lines``, ``non_html_records``, ...) to records a reader left out on purpose;
    ``tallies`` holds the counts ``core.tallies`` declares (the lines each line modifier took
    out of the documents it edited, the documents each rule would drop); ``tokens`` counts the
    tokens of the documents a token counter saw; ``contamination`` is what decontamination found; ``times`` is where the stages' time went while producing
    this task (``stages.meter``).
    """

    rows_read: int = 0
    bytes_read: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    times: tuple[StageTime, ...] = ()
    contamination: Contamination = field(default_factory=Contamination)
    tallies: Tallies = field(default_factory=Tallies)

    def with_time(self, time: StageTime) -> TaskCounters:
        totals = {t.key: t for t in self.times}
        add_stage_times(totals, (time,))
        return replace(self, times=tuple(totals.values()))

    def with_dropped(self, stage: str, rows: int) -> TaskCounters:
        return replace(self, dropped={**self.dropped, stage: self.dropped.get(stage, 0) + rows})

    def with_skipped(self, reason: str, records: int) -> TaskCounters:
        if not records:
            return self
        return replace(self, skipped={**self.skipped, reason: self.skipped.get(reason, 0) + records})

    def with_tally(self, name: str, counts: Mapping[str, int]) -> TaskCounters:
        return replace(self, tallies=self.tallies.plus(name, counts))

    def __add__(self, other: TaskCounters) -> TaskCounters:
        dropped, skipped = dict(self.dropped), dict(self.skipped)
        for target, source in ((dropped, other.dropped), (skipped, other.skipped)):
            for key, value in source.items():
                target[key] = target.get(key, 0) + value
        times = {t.key: t for t in self.times}
        add_stage_times(times, other.times)
        return TaskCounters(self.rows_read + other.rows_read, self.bytes_read + other.bytes_read, dropped, skipped,
                            self.tokens + other.tokens, tuple(times.values()),
                            self.contamination + other.contamination, self.tallies + other.tallies)


@dataclass
class Task:
    task_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    counters: TaskCounters = field(default_factory=TaskCounters)

    def failed(self, reason: str, stage: str = "") -> FailedTask:
        """This task's source task, failed: the shard must be rerun."""
        return FailedTask(self.task_id, dict(self.metadata), self.counters, reason=reason, stage=stage)


INPUT_BYTES = "input_bytes"  # a listed task's metadata: its files' size, as the listing froze it


@dataclass(frozen=True)
class FileCut:
    """Part ``part`` (from 0) of ``parts`` of a task's one file, for a reader that can start
    reading anywhere in it: the records that begin in its share of the bytes, say. Cutting a
    few large files lets every worker take a share of the last one, instead of one worker
    reading it while the others wait."""

    part: int
    parts: int
    size: int | None = None  # the file's size when it was cut (listed): a file that changed since fails the part

    @property
    def final(self) -> bool:
        return self.part == self.parts - 1

    def share(self, size: int) -> tuple[int, int]:
        """The [start, end) of ``size`` units (bytes, row groups) this part covers."""
        return size * self.part // self.parts, size * (self.part + 1) // self.parts


@dataclass
class FileGroupTask(Task):
    """A group of input files that is processed, and written, as one unit (or a ``cut`` of
    its one file: each written as a numbered part, see ``DocumentBatch``)."""

    files: list[str] = field(default_factory=list)
    root: str = ""
    cut: FileCut | None = None


@dataclass
class DocumentBatch(Task):
    """Documents of one source task as an Arrow table (one row per document).

    A reader that streams a large file, or reads a cut of it, emits it in numbered ``part``s
    (0, 1, ...); each part is written to its own file, and the last one is ``final``, so the
    driver knows when every part of a task is written. ``None`` means the batch is the whole
    source task.
    """

    table: pa.Table = field(default_factory=_empty_table)
    part: int | None = None
    final: bool = True
    removed: dict[str, pa.Table] = field(default_factory=dict)  # stage → rows it dropped, when they are kept

    @property
    def num_rows(self) -> int:
        return self.table.num_rows


@dataclass
class WrittenFiles(Task):
    """What a writer produced for one source task (or one ``part`` of it, see ``DocumentBatch``)."""

    files: list[str] = field(default_factory=list)
    rows_written: int = 0
    part: int | None = None
    final: bool = True
    parts: int = 1  # parts ``part`` to ``part + parts - 1``: those one file holds
    shown: bool = False  # its counters reached the progress line already, part by part (``PartShown``)
    checks: tuple[tuple[str, int, int], ...] = ()  # (name under the output dir, size, CRC-32), once recorded


@dataclass
class PartShown(Task):
    """A part a writer appended to a file that is not in place yet: what it read, for the
    progress line while its task runs (a WARC takes minutes). Its counters come again, for the
    record, with the ``WrittenFiles`` of its file, marked ``shown``."""

    part: int = 0


@dataclass
class FailedTask(Task):
    """A source task that could not be processed; its shard must be rerun."""

    reason: str = ""
    stage: str = ""

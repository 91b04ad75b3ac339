"""Recording finished tasks where they finish: on the worker that renamed their outputs.

The driver learns of a written part only after Ray Data hands it over, which can lag far
behind the rename when the driver is busy or the output queue is long; a record kept at
the driver is then lost with it. So the last stage of every recorded shard is
:class:`RecordParts`, which runs in the writer's process (it chains with the writer):
it checksums the part's files and syncs its line before the part goes anywhere. The
driver's :class:`TaskCompletion` only follows along, for the manifest's account.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..core.task_records import PartRecord, PartRecordLog, TaskRecord, file_check, finished_task
from ..stages.base import ProcessingStage
from ..stages.tasks import FailedTask, Task, WrittenFiles


def relative_to(root: Path | None, path: str) -> str:
    """``path`` relative to ``root`` when it lies under it (as manifests and records name outputs)."""
    resolved = Path(path).resolve()
    return resolved.relative_to(root).as_posix() if root is not None and resolved.is_relative_to(root) else path


def checked(written: WrittenFiles, root: Path) -> WrittenFiles:
    """``written`` with (name, size, CRC-32) of each of its files, read from disk once (a
    writer that counted them as it wrote them has handed them on already)."""
    if written.checks or not written.files:
        return written
    root = root.resolve()
    return replace(written, checks=tuple((relative_to(root, path), *file_check(path)) for path in written.files))


def part_record(written: WrittenFiles, attempt: str) -> PartRecord:
    counters = written.counters
    record = TaskRecord(written.task_id, tuple(sorted(written.checks)), counters.rows_read, written.rows_written,
                        counters.bytes_read, dict(counters.dropped), dict(counters.skipped), attempt, counters.tokens,
                        counters.contamination, counters.tallies)
    return PartRecord(written.part or 0, written.final, record, written.parts)


class RecordParts(ProcessingStage):
    """Appended after the writer: records each written part in this worker's part file."""

    name = "record"
    pinned = ()  # bookkeeping: it changes no output

    def __init__(self, directory: Path, root: Path, attempt: str, like: ProcessingStage):
        self.resources, self.batch_size = like.resources, like.batch_size
        self.directory, self.root, self.attempt = str(directory), str(root), attempt
        super().__init__()

    def process(self, task: Task) -> Task:
        if not isinstance(task, WrittenFiles):
            return task
        task = checked(task, Path(self.root))
        PartRecordLog(Path(self.directory)).append(part_record(task, self.attempt))
        return task


class TaskCompletion:
    """Which tasks have every output written, and their records, as results reach the driver.

    A task's parts may arrive in any order; it is finished when the part marked ``final``
    and every part before it are written, and none of it failed.
    """

    def __init__(self, root: Path, attempt: str, check_files: bool = True):
        self.root = Path(root)  # resolved by `checked` only when a file needs its check read
        self.attempt = attempt
        self.check_files = check_files  # off: records without files' checks, only to follow which tasks finished
        self.parts: dict[str, dict[int, PartRecord]] = {}
        self.failed: set[str] = set()
        self.records: dict[str, TaskRecord] = {}

    def add(self, result: Task) -> TaskRecord | None:
        """The task's record if ``result`` finished it."""
        if isinstance(result, FailedTask):
            self.failed.add(result.task_id)
            self.parts.pop(result.task_id, None)
            return None
        if not isinstance(result, WrittenFiles) or result.task_id in self.failed:
            return None
        parts = self.parts.setdefault(result.task_id, {})
        part = part_record(checked(result, self.root) if self.check_files else result, self.attempt)
        parts[part.part] = part
        record = finished_task(parts)
        if record is not None:
            del self.parts[result.task_id]
            self.records[record.task_id] = record
        return record

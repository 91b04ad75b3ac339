"""The units of work that flow between stages.

Every task keeps the id of the source task it came from, so a failure anywhere downstream
can be traced to the shard that must be rerun, and writers can name outputs from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass
class Task:
    task_id: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class FileGroupTask(Task):
    """A group of input files that is processed, and written, as one unit."""

    files: list[str] = field(default_factory=list)
    root: str = ""


@dataclass
class DocumentBatch(Task):
    """Documents of one source task as an Arrow table (one row per document)."""

    table: pa.Table = field(default_factory=pa.table)

    @property
    def num_rows(self) -> int:
        return self.table.num_rows


@dataclass
class WrittenFiles(Task):
    """What a writer produced for one source task."""

    files: list[str] = field(default_factory=list)
    rows_written: int = 0


@dataclass
class FailedTask(Task):
    """A source task that could not be processed; its shard must be rerun."""

    reason: str = ""
    stage: str = ""

    def to_record(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "stage": self.stage, "reason": self.reason}

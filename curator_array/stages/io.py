"""Readers (JSONL, JSONL.gz, Parquet) and writers (JSONL, Parquet).

Writers name each output after its source task id and write a hidden temporary file that
is renamed into place, so a replayed shard overwrites its own files and nobody ever sees a
partial file under a final name.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from ..atomic import fsync_directory, temporary_sibling
from ..errors import ConfigError
from ..tasks import DocumentBatch, FailedTask, FileGroupTask, Task, WrittenFiles
from .base import ProcessingStage

MALFORMED_POLICIES = ("fail", "skip")


def _concat(tables: list[pa.Table]) -> pa.Table:
    non_empty = [t for t in tables if t.num_columns]
    if not non_empty:
        return pa.table({})
    return pa.concat_tables(non_empty, promote_options="permissive")


def _open_text(path: str):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


class MalformedRecordError(ValueError):
    pass


def _read_jsonl_slowly(path: str, policy: str) -> tuple[pa.Table, int]:
    """Line-by-line reading that knows line numbers: used when the fast reader refuses a file."""
    rows: list[dict[str, Any]] = []
    skipped = 0
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError(f"expected a JSON object, got {type(record).__name__}")
            except ValueError as exc:
                if policy == "skip":
                    skipped += 1
                    continue
                raise MalformedRecordError(f"{path}: line {number}: malformed JSON record ({exc})") from None
            rows.append(record)
    return pa.Table.from_pylist(rows), skipped


def read_jsonl(path: str, policy: str = "fail") -> tuple[pa.Table, int]:
    """Returns the table and the number of malformed lines skipped."""
    if os.path.getsize(path) == 0:
        return pa.table({}), 0
    try:
        return pa_json.read_json(path), 0
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return _read_jsonl_slowly(path, policy)


class JsonlReader(ProcessingStage):
    """Reads every file of a FileGroupTask into one DocumentBatch.

    ``malformed="fail"`` (default) fails the task naming the file and line; ``"skip"``
    drops bad lines and counts them (``metadata["malformed_skipped"]``).
    """

    name = "jsonl_reader"

    def __init__(self, malformed: str = "fail"):
        if malformed not in MALFORMED_POLICIES:
            raise ConfigError(f"malformed-record policy {malformed!r}: use one of {', '.join(MALFORMED_POLICIES)}")
        self.malformed = malformed
        super().__init__()

    def read_file(self, path: str) -> tuple[pa.Table, int]:
        return read_jsonl(path, self.malformed)

    def process(self, task: FileGroupTask) -> Task:
        tables, skipped = [], 0
        for path in task.files:
            try:
                table, bad = self.read_file(path)
            except (MalformedRecordError, OSError, pa.ArrowException) as exc:
                return FailedTask(task.task_id, dict(task.metadata), reason=f"{path}: {exc}" if path not in str(exc) else str(exc), stage=self.stage_name)
            tables.append(table)
            skipped += bad
        table = _concat(tables)
        metadata = {**task.metadata, "rows_read": table.num_rows, "malformed_skipped": skipped, "source_files": list(task.files)}
        return DocumentBatch(task.task_id, metadata, table=table)


class ParquetReader(JsonlReader):
    name = "parquet_reader"

    def __init__(self) -> None:
        super().__init__("fail")

    def read_file(self, path: str) -> tuple[pa.Table, int]:
        if os.path.getsize(path) == 0:
            return pa.table({}), 0
        try:
            return pq.read_table(path), 0
        except pa.ArrowException as exc:
            raise MalformedRecordError(f"{path}: unreadable Parquet file ({exc})") from None


def reader_for(file_type: str, malformed: str = "fail") -> ProcessingStage:
    if file_type == "jsonl":
        return JsonlReader(malformed)
    if file_type == "parquet":
        if malformed != "fail":
            raise ConfigError("--malformed skip applies to JSONL input only")
        return ParquetReader()
    raise ConfigError(f"input file type {file_type!r} is not supported; use jsonl or parquet")


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


class _Writer(ProcessingStage):
    suffix = ""

    def __init__(self, output_dir: str | os.PathLike):
        self.output_dir = Path(output_dir)
        super().__init__()

    def output_path(self, task: Task) -> Path:
        return self.output_dir / f"{task.task_id}{self.suffix}"

    def write_table(self, table: pa.Table, path: Path) -> None:
        raise NotImplementedError

    def process(self, task: DocumentBatch) -> WrittenFiles:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        final = self.output_path(task)
        tmp = temporary_sibling(final)
        try:
            self.write_table(task.table, tmp)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_directory(final.parent)
        return WrittenFiles(task.task_id, dict(task.metadata), files=[str(final)], rows_written=task.num_rows)


class JsonlWriter(_Writer):
    name = "jsonl_writer"
    suffix = ".jsonl"

    def write_table(self, table: pa.Table, path: Path) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            for batch in table.to_batches(max_chunksize=4096):
                handle.writelines(
                    json.dumps(row, ensure_ascii=False, default=_json_default) + "\n" for row in batch.to_pylist()
                )
            handle.flush()
            os.fsync(handle.fileno())


class ParquetWriter(_Writer):
    name = "parquet_writer"
    suffix = ".parquet"

    def write_table(self, table: pa.Table, path: Path) -> None:
        pq.write_table(table, path, compression="zstd")
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())


def writer_for(file_type: str, output_dir: str | os.PathLike) -> ProcessingStage:
    if file_type == "jsonl":
        return JsonlWriter(output_dir)
    if file_type == "parquet":
        return ParquetWriter(output_dir)
    raise ConfigError(f"output file type {file_type!r} is not supported; use jsonl or parquet")

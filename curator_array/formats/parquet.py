"""Apache Parquet, written with zstd compression."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.atomic import replacing
from ..stages.io import (
    COLUMN_BATCH_ROWS,
    MIN_CUT_BYTES,
    FileContents,
    MalformedRecordError,
    ReaderStage,
    WriterStage,
    with_columns,
)
from ..stages.tasks import FileCut


class ParquetReader(ReaderStage):
    name = "parquet_reader"
    pinned = ("malformed",)
    format_name = "parquet"

    def read_file(self, path: str) -> FileContents:
        if os.path.getsize(path) == 0:
            return FileContents(pa.table({}))
        try:
            return FileContents(pq.read_table(path))
        except pa.ArrowException as exc:
            raise MalformedRecordError(f"{path}: unreadable Parquet file ({exc})") from None

    def cut_units(self, path: str, finer: int = 1) -> int:
        """Whole row groups, of at least ``MIN_CUT_BYTES / finer`` of the file on average."""
        most = os.path.getsize(path) * finer // MIN_CUT_BYTES
        return min(pq.ParquetFile(path).metadata.num_row_groups, most) if most else 0

    def read_cut(self, path: str, cut: FileCut) -> FileContents:
        try:
            reader = pq.ParquetFile(path)
            first, last = cut.share(reader.metadata.num_row_groups)
            return FileContents(reader.read_row_groups(range(first, last)) if last > first
                                else reader.schema_arrow.empty_table())
        except pa.ArrowException as exc:
            raise MalformedRecordError(f"{path}: unreadable Parquet file ({exc})") from None

    def schema(self, path: str) -> pa.Schema:
        return pq.read_schema(path)

    def read_columns(self, path: str, columns: Collection[str]) -> Iterator[pa.Table]:
        if os.path.getsize(path) == 0:
            return
        try:
            reader = pq.ParquetFile(path)
            wanted = [name for name in reader.schema_arrow.names if name in columns]
            for batch in reader.iter_batches(batch_size=COLUMN_BATCH_ROWS, columns=wanted):
                yield with_columns(pa.Table.from_batches([batch]), columns)
        except pa.ArrowException as exc:
            raise MalformedRecordError(f"{path}: unreadable Parquet file ({exc})") from None


COMPRESSION = "zstd"


class ParquetWriter(WriterStage):
    name = "parquet_writer"
    pinned = ()  # where it writes is not what it writes
    format_name = "parquet"
    suffix = ".parquet"

    def write_table(self, table: pa.Table, file: BinaryIO) -> None:
        pq.write_table(table, file, compression=COMPRESSION)

    def open_sink(self, file: BinaryIO, schema: pa.Schema) -> ParquetSink:
        return ParquetSink(file, schema)


FOOTER_PER_COLUMN, MAX_STATISTICS_BYTES = 256, 4096


def _variable_width(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or \
        pa.types.is_large_binary(kind)


class ParquetSink:
    """A Parquet file that takes tables of one schema as row groups, written as they come."""

    def __init__(self, file: BinaryIO, schema: pa.Schema):
        self.file = file
        self.schema = schema
        self.writer = pq.ParquetWriter(self.file, schema, compression=COMPRESSION)
        self.row_groups = 0

    def _matching(self, table: pa.Table) -> pa.Table | None:
        """``table`` in the file's schema: as it is, or with its all-null columns typed as the
        file's and the file's columns it lacks (a step that added one dropped none of these
        rows) as nulls; none when it has a column the file has not."""
        if table.schema.equals(self.schema, check_metadata=False):
            return table
        theirs = {field.name: field.type for field in table.schema}
        if len(theirs) != len(table.schema) or not theirs.keys() <= set(self.schema.names):
            return None
        if any(not pa.types.is_null(theirs[field.name]) and theirs[field.name] != field.type
               for field in self.schema if field.name in theirs):
            return None
        return pa.table([table.column(field.name).cast(field.type) if field.name in theirs
                         else pa.nulls(table.num_rows, field.type) for field in self.schema], schema=self.schema)

    def accepts(self, table: pa.Table) -> bool:
        return self._matching(table) is not None

    def write(self, table: pa.Table) -> None:
        self.writer.write_table(self._matching(table))
        self.row_groups += 1

    def tell(self) -> int:
        return self.file.tell()

    def closing_bytes(self, table: pa.Table) -> int:
        """The footer, at its largest: per row group and column, its metadata and, for text and
        binary columns, a minimum and a maximum of up to Arrow's 4,096 bytes each."""
        per_group = sum(FOOTER_PER_COLUMN + (2 * MAX_STATISTICS_BYTES if _variable_width(f.type) else 64)
                        for f in self.schema)
        return (self.row_groups + 1) * per_group

    def close(self) -> None:
        self.writer.close()
        self.file.close()


def write_parquet(table: pa.Table, path: Path) -> None:
    """``table`` at ``path``, complete and synced before its name appears (a killed writer
    leaves nothing half-written); for files a phase keeps in the checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as partial:
        pq.write_table(table, partial, compression=COMPRESSION)

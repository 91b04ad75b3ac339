"""Apache Parquet, written with zstd compression."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.atomic import replacing
from ..stages.io import (
    COLUMN_BATCH_ROWS,
    FileContents,
    MalformedRecordError,
    ReaderStage,
    WriterStage,
    with_columns,
)


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

    def write_table(self, table: pa.Table, path: Path) -> None:
        pq.write_table(table, path, compression=COMPRESSION)


def write_parquet(table: pa.Table, path: Path) -> None:
    """``table`` at ``path``, complete and synced before its name appears (a killed writer
    leaves nothing half-written); for files a phase keeps in the checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as partial:
        pq.write_table(table, partial, compression=COMPRESSION)

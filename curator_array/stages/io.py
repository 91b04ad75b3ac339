"""The base classes of readers and writers; each file format subclasses them once.

A reader turns the files of a ``FileGroupTask`` into one ``DocumentBatch`` and counts what
it read. A writer names each output after its source task id and writes a hidden
temporary file that is renamed into place, so a replayed shard overwrites its own files
and nobody ever sees a partial file under a final name. Formats live in
``curator_array.formats`` (one file each), which maps a format name to its suffixes,
reader and writer.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np
import pyarrow as pa

from ..core.atomic import dump_json
from ..core.errors import ConfigError
from ..storage.places import OutputPlace, fetched, is_s3, place_of, split_location
from .base import ProcessingStage
from .defaults import MALFORMED_POLICIES, OUTPUT_FILE_SIZE
from .output_files import GrowingFiles, PlacedFile, TableSink, write_placed
from .tasks import (
    INPUT_BYTES,
    DocumentBatch,
    FileCut,
    FileGroupTask,
    PartShown,
    Task,
    TaskCounters,
    WrittenFiles,
)


class MalformedRecordError(ValueError):
    """A record (or a whole file) a reader cannot decode; the message names file and place."""


READ_ERRORS = (MalformedRecordError, OSError, pa.ArrowException)
COLUMN_BATCH_ROWS = 8192  # rows per table of ``ReaderStage.read_columns``
MIN_CUT_BYTES = 16 << 20  # a smaller cut of a file costs more (a task, a file) than it evens out


@dataclass
class FileContents:
    """What a reader got from one file: its rows, and records it left out on purpose."""

    table: pa.Table
    skipped: dict[str, int] = field(default_factory=dict)
    consumed: int | None = None  # a streamed part: bytes of the file read up to its end (None: all)


def concat_tables(tables: list[pa.Table]) -> pa.Table:
    non_empty = [t for t in tables if t.num_columns]
    if not non_empty:
        return pa.table({})
    return pa.concat_tables(non_empty, promote_options="permissive")


def with_columns(table: pa.Table, columns: Collection[str]) -> pa.Table:
    """``table``'s ``columns`` in that order, a column it lacks as nulls."""
    return pa.table({name: table[name] if name in table.column_names else pa.nulls(table.num_rows, pa.string())
                     for name in columns})


def source_name(task: FileGroupTask, path: str) -> str:
    """Where a part's rows come from, the same under every mount point: the URL a file was
    downloaded from, else its path under the input directory."""
    urls = dict(zip(task.files, task.metadata.get("urls", ())))
    if path in urls:
        return urls[path]
    return os.path.relpath(path, task.root) if task.root and path.startswith(task.root) else path


class ReaderStage(ProcessingStage):
    """Reads the files of a FileGroupTask into DocumentBatches.

    Subclasses implement ``read_file`` (the whole file at once: one batch for the task) or,
    for formats whose files are too large to hold (``streams = True``), ``read_parts``,
    which yields the file in parts; each becomes a numbered batch, so memory is bounded by
    the part size, not the file size. Formats that can start reading anywhere in a file
    implement ``cut_units`` and ``read_cut``: a task of one large local file is then cut
    into parts that several workers read at once (``cut``). A file that cannot be read fails
    its task with a message naming the file (and the line or offset, where the format knows it).
    ``malformed="skip"`` is accepted only by formats that can skip single records
    (``skips_malformed``); they then count what they skipped.
    """

    format_name: ClassVar[str] = ""
    skips_malformed: ClassVar[bool] = False
    streams: ClassVar[bool] = False
    columns: ClassVar[tuple[str, ...] | None] = None  # what every batch holds, when the format fixes it

    def writes(self) -> tuple[str, ...] | None:
        return self.columns

    def __init__(self, malformed: str = MALFORMED_POLICIES[0]):
        if malformed not in MALFORMED_POLICIES:
            raise ConfigError(f"malformed-record policy {malformed!r}: use one of {', '.join(MALFORMED_POLICIES)}")
        if malformed != "fail" and not self.skips_malformed:
            raise ConfigError(f"--malformed {malformed} does not apply to {self.format_name} input")
        self.malformed = malformed
        super().__init__()

    def read_file(self, path: str) -> FileContents:
        raise NotImplementedError(f"{type(self).__name__} must implement read_file() or read_parts()")

    def read_parts(self, path: str) -> Iterator[FileContents]:
        yield self.read_file(path)

    def cut_units(self, path: str, finer: int = 1) -> int:
        """Into how many parts of at least ``MIN_CUT_BYTES / finer`` the format can cut the
        local file at ``path`` (1: it cannot, a compressed stream say)."""
        return 1

    def read_cut(self, path: str, cut: FileCut) -> FileContents:
        """The records of ``cut`` of the file: together, the parts read each record once."""
        raise NotImplementedError(f"{type(self).__name__} cannot read part of a file")

    def most_cuts(self, task: Task, finer: int = 1) -> int:
        if not isinstance(task, FileGroupTask) or len(task.files) != 1 or task.cut is not None \
                or is_s3(task.files[0]):
            return 1
        try:
            return max(1, self.cut_units(task.files[0], finer))
        except (OSError, pa.ArrowException):
            return 1  # read whole, the task then fails with the reason

    def cut(self, task: FileGroupTask, parts: int) -> list[FileGroupTask]:
        if parts <= 1:
            return [task]
        size = task.metadata.get(INPUT_BYTES)
        tasks = []
        for cut in (FileCut(part, parts, size) for part in range(parts)):
            start, end = cut.share(size or 0)
            tasks.append(replace(task, cut=cut, metadata={**task.metadata, INPUT_BYTES: end - start if size else size}))
        return tasks

    def schema(self, path: str) -> pa.Schema:
        """The columns the file's rows have, as ``read_file`` gives them (formats that can tell
        without reading every row override it)."""
        return self.read_file(path).table.schema

    def read_columns(self, path: str, columns: Collection[str]) -> Iterator[pa.Table]:
        """The file's rows in order, a batch at a time, with each of ``columns`` (null where
        the file lacks it): for phases that read a run's outputs again (dedup signatures),
        which then hold a batch, not a file. Formats that can read a few columns a batch at
        a time override it; this default reads the whole file."""
        table = with_columns(self.read_file(path).table, columns)
        for start in range(0, table.num_rows, COLUMN_BATCH_ROWS):
            yield table.slice(start, COLUMN_BATCH_ROWS)


    @staticmethod
    def _reason(path: str, exc: BaseException, local: str | None = None) -> str:
        """One line naming ``path`` (an object read from ``local``, its copy, names the object)."""
        text = str(exc).replace(local, path) if local else str(exc)
        return text if path in text else f"{path}: {text}"

    def process(self, task: FileGroupTask):
        if task.cut is not None:
            return self._read_cut(task, task.cut)
        if self.streams:
            return self._stream(task)
        tables, counters = [], TaskCounters()
        for path in task.files:
            local = None
            try:
                with fetched(path) as copy:  # an s3:// object from a local copy, a file as it is
                    local = str(copy)
                    contents = self.read_file(local)
                    size = os.path.getsize(local)
            except READ_ERRORS as exc:
                return task.failed(self._reason(path, exc, local), self.stage_name)
            tables.append(contents.table)
            counters = counters + TaskCounters(rows_read=contents.table.num_rows, bytes_read=size,
                                               skipped=contents.skipped)
        metadata = {**task.metadata, "source_files": list(task.files)}
        return DocumentBatch(task.task_id, metadata, task.counters + counters, table=concat_tables(tables))

    def _read_cut(self, task: FileGroupTask, cut: FileCut) -> Task:
        """The cut as part ``cut.part`` of the task; it counts its share of the file's bytes."""
        path = task.files[0]
        try:
            size = os.path.getsize(path)
            if cut.size is not None and size != cut.size:
                raise OSError(f"changed while its parts were read: listed at {cut.size:,} bytes, now {size:,}")
            contents = self.read_cut(path, cut)
        except READ_ERRORS as exc:
            return task.failed(self._reason(path, exc), self.stage_name)
        start, end = cut.share(size)
        counters = TaskCounters(rows_read=contents.table.num_rows, bytes_read=end - start, skipped=contents.skipped)
        metadata = {**task.metadata, "source_files": list(task.files), "source_file": source_name(task, path)}
        return DocumentBatch(task.task_id, metadata, task.counters + counters, table=contents.table, part=cut.part,
                             final=cut.final)

    def _stream(self, task: FileGroupTask) -> Iterator[Task]:
        """Parts numbered over all the task's files; each is held back until the next is read,
        so the last one can say it is ``final``."""
        metadata = {**task.metadata, "source_files": list(task.files)}
        held: DocumentBatch | None = None
        part = 0
        for path in task.files:
            part_metadata = {**metadata, "source_file": source_name(task, path)}
            local = None
            try:
                with fetched(path) as copy:  # an s3:// object from a local copy, a file as it is
                    local = str(copy)
                    size, counted = os.path.getsize(local), 0
                    for contents in self.read_parts(local):
                        upto = size if contents.consumed is None else min(contents.consumed, size)
                        counters = TaskCounters(rows_read=contents.table.num_rows, bytes_read=max(upto - counted, 0),
                                                skipped=contents.skipped)
                        counted = max(counted, upto)  # a file's bytes count once, part by part as it is read
                        if held is not None:
                            yield held
                        held = DocumentBatch(task.task_id, part_metadata, counters, table=contents.table, part=part,
                                             final=False)
                        part += 1
            except READ_ERRORS as exc:
                if held is not None:
                    yield held
                yield task.failed(self._reason(path, exc, local), self.stage_name)
                return
        if held is None:
            held = DocumentBatch(task.task_id, metadata, task.counters, table=pa.table({}), part=0)
        yield replace(held, final=True)


REMOVED_KEY = "removed"  # a task's growing file of removed rows, beside its output's ("")
Added = tuple[Mapping[int, Any], Any]  # a field a rewrite adds: its value by row number, and for other rows


class WriterStage(ProcessingStage):
    """Writes each source task's documents under ``output_dir`` (a directory or an ``s3://``
    prefix: ``storage.places``), atomically; no file for a task whose documents were all dropped.

    A task read whole is one file, ``<task id><suffix>``. The parts of a streamed task are
    appended to growing files (``output_files``) of at most ``file_size`` bytes on disk,
    ``<task id>.<first part><suffix>``; the written parts of a file are handed on only once
    it is in place, so the task's record never names a file that is not complete. Every
    pipeline ends in a writer: it is what turns a source task into files the completion
    manifest can list.
    """

    format_name: ClassVar[str] = ""
    suffix: ClassVar[str] = ""

    def __init__(self, output_dir: str | os.PathLike, file_size: int = OUTPUT_FILE_SIZE):
        self.output_dir = str(output_dir)
        self.place: OutputPlace = place_of(output_dir)
        self.removed_place: OutputPlace | None = None  # where the rows stages dropped go, when the run keeps them
        self.file_size = file_size
        self._growing: GrowingFiles | None = None
        self._held: dict[str, list[WrittenFiles]] = {}  # written parts of a task whose file is not closed yet
        super().__init__()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_growing": None, "_held": {}}

    def output_name(self, task_id: str) -> str:
        """``<task id><suffix>``: the file of a task read whole."""
        return f"{task_id}{self.suffix}"

    def keep_removed_in(self, directory: str | os.PathLike) -> None:
        """Write the rows stages dropped (``stages.removed``) under ``directory``, each task's
        in files of its own named as its output's, every step's rows together."""
        self.removed_place = place_of(directory)

    def removed_places(self) -> list[OutputPlace]:
        """Where the rows the steps dropped went (none when the run keeps none)."""
        return [self.removed_place] if self.removed_place is not None else []

    def roll_at(self, file_size: int) -> None:
        """Roll a streamed task's file over at ``file_size`` bytes on disk (``--output-file-size``)."""
        self.file_size = file_size

    def _removed_rows(self, task: DocumentBatch) -> pa.Table | None:
        """The rows every step dropped from ``task``, in one table, when the run keeps them."""
        if self.removed_place is None or not task.removed:
            return None
        return pa.concat_tables(task.removed.values(), promote_options="permissive")

    def _write_placed(self, place: OutputPlace, name: str, table: pa.Table) -> PlacedFile:
        return write_placed(place, name, lambda partial: self.write_table(table, partial))

    def _sync(self, places: list[OutputPlace]) -> None:
        """Sync the renames of the files put in ``places``, before any record names them: once
        per task, not per file."""
        for place in places:
            place.sync()

    def open_sink(self, file: BinaryIO, schema: pa.Schema) -> TableSink:
        """A sink on the new ``file`` that takes tables of ``schema`` one after another."""
        raise NotImplementedError

    def write_table(self, table: pa.Table, file: BinaryIO) -> None:
        """Write ``table`` to the new ``file`` (the caller closes it and puts it in place)."""
        sink = self.open_sink(file, table.schema)
        sink.write(table)
        sink.close()

    def rewrite(self, source: str | Path, target: str | Path, reader: ReaderStage, rows: Collection[int], *,
                only: bool = False, added: Mapping[str, Added] | None = None,
                replaced: Mapping[str, Mapping[int, Any]] | None = None) -> tuple[int, int]:
        """``source``, a file this writer wrote, at ``target`` (a path or an ``s3://`` URL, as
        both are) without the rows numbered in ``rows`` (or, with ``only``, with those rows
        alone), each row written given the fields ``added`` (name → (value by row number, the
        value of other rows)) and, for the rows ``replaced`` names, new values of existing
        fields (name → value by row number); returns (rows read, rows written). Rows are
        numbered as ``reader`` (this format's) numbers them. Atomic, and a rerun writes the
        same bytes again."""
        with fetched(source) as local:
            table = reader.read_file(str(local)).table
        chosen = np.zeros(table.num_rows, dtype=bool)
        chosen[[row for row in rows if row < table.num_rows]] = True
        written = np.flatnonzero(chosen if only else ~chosen)
        table = table.take(pa.array(written))
        for name, values in (replaced or {}).items():
            column = table[name].to_pylist()
            for position, row in enumerate(written.tolist()):
                column[position] = values.get(row, column[position])
            table = table.set_column(table.column_names.index(name), name, pa.array(column, table.schema.field(name).type))
        for name, (values, default) in (added or {}).items():
            table = table.append_column(name, pa.array([values.get(row, default) for row in written.tolist()]))
        self.write_at(target, table)
        return len(chosen), table.num_rows

    def write_at(self, target: str | Path, table: pa.Table) -> None:
        """``table`` as this format's file at ``target`` (a path or an ``s3://`` URL), atomically."""
        place, name = split_location(target)
        self._write_placed(place, name, table)
        place.sync()

    def process(self, task: DocumentBatch) -> WrittenFiles | list[Task]:
        if task.part is not None:
            return self._append_part(task)
        name = self.output_name(task.task_id)
        removed, written = self._removed_rows(task), []
        if removed is not None:  # before the output, so an output in place means its removed rows are too
            self._write_placed(self.removed_place, name, removed)
            written.append(self.removed_place)
        placed = [self._write_placed(self.place, name, task.table)] if task.num_rows else []
        self._sync(written + [self.place] * len(placed))
        return self._written(task, placed)

    @staticmethod
    def _written(task: DocumentBatch, placed: list[PlacedFile]) -> WrittenFiles:
        return WrittenFiles(task.task_id, dict(task.metadata), task.counters, files=[p.location for p in placed],
                            rows_written=task.num_rows, part=task.part, final=task.final,
                            checks=tuple(p.check for p in placed))

    def _append_part(self, task: DocumentBatch) -> list[Task]:
        if self._growing is None:
            self._growing = GrowingFiles(self.suffix, self.open_sink, self.file_size)
        try:
            return self._append(self._growing, task)
        except BaseException:
            self._abandon(task.task_id)
            raise

    def _abandon(self, task_id: str) -> None:
        self._held.pop(task_id, None)
        if self._growing is not None:
            self._growing.abandon(task_id)

    def _append(self, growing: GrowingFiles, task: DocumentBatch) -> list[Task]:
        """Removed rows first, then the documents; what closed on the way is handed on, after
        the part's ``PartShown``."""
        part, handed = task.part or 0, []
        removed = self._removed_rows(task)
        if removed is not None:
            growing.append((task.task_id, REMOVED_KEY), self.removed_place, part, removed)
        else:
            growing.skip((task.task_id, REMOVED_KEY), part)
        output = (task.task_id, "")
        if task.num_rows:
            if growing.get(output) is not None and not growing.fits(output, part, task.table):
                handed += self._close_task(task.task_id)
            growing.append(output, self.place, part, task.table)
        else:
            growing.skip(output, part)
        self._held.setdefault(task.task_id, []).append(replace(self._written(task, []), shown=True))
        if task.final:
            handed += self._close_task(task.task_id)
        read = TaskCounters(rows_read=task.counters.rows_read, bytes_read=task.counters.bytes_read)
        return [PartShown(task.task_id, dict(task.metadata), read, part=part), *handed]

    def _close_task(self, task_id: str) -> list[WrittenFiles]:
        """Put the task's open files in place (removed rows before documents) and hand on the
        parts they hold: one account per run of consecutive parts (one record line and sync
        per file, not per part), the output file on the run that holds its first part."""
        growing = self._growing
        output = growing.get((task_id, "")) if growing is not None else None
        keys = growing.of_task(task_id) if growing is not None else []
        for key in keys:
            if key[1]:
                growing.close(key)
        placed = growing.close((task_id, "")) if output is not None else None
        if keys:
            self._sync([self.place, *self.removed_places()])
        runs = _consecutive(self._held.pop(task_id, []))
        if output is not None:
            runs = [replace(run, files=[placed.location], checks=(placed.check,))
                    if run.part <= output.first_part < run.part + run.parts else run for run in runs]
        return runs

    def finish(self) -> list[WrittenFiles]:
        """At the end of a block of work: every open file in place, its parts handed on (a
        task's next parts, if any, go on in a file of their own)."""
        handed: list[WrittenFiles] = []
        for task_id, held in list(self._held.items()):
            try:
                handed += self._close_task(task_id)
            except Exception as exc:  # noqa: BLE001 - the task fails, the others' files still close
                self._abandon(task_id)
                handed.append(held[0].failed(f"{type(exc).__name__}: {exc}", self.stage_name))
        return handed


def _consecutive(held: list[WrittenFiles]) -> list[WrittenFiles]:
    """``held`` (parts in arrival order) as one account per run of consecutive parts."""
    runs: list[WrittenFiles] = []
    for written in sorted(held, key=lambda w: w.part or 0):
        last = runs[-1] if runs else None
        if last is not None and (last.part or 0) + last.parts == written.part:
            runs[-1] = replace(last, counters=last.counters + written.counters,
                               rows_written=last.rows_written + written.rows_written, final=written.final,
                               parts=last.parts + written.parts)
        else:
            runs.append(written)
    return runs


class FileListWriter(WriterStage):
    """Ends a pipeline whose result is files on disk (a download-only run, say).

    For each ``FileGroupTask`` it writes ``<task id>.files.json``: the files and their
    sizes, so the completion manifest points at a record of what the task produced.
    """

    name = "file_list_writer"
    pinned = ()  # where it writes is not what it writes
    format_name = "file-list"
    suffix = ".files.json"

    def process(self, task: FileGroupTask) -> WrittenFiles:  # type: ignore[override]
        listing = [{"path": path, "bytes": os.path.getsize(path)} for path in task.files]
        data = dump_json({"task_id": task.task_id, "files": listing})
        placed = write_placed(self.place, self.output_name(task.task_id), lambda partial: partial.write(data))
        self.place.sync()
        return WrittenFiles(task.task_id, dict(task.metadata), task.counters, files=[placed.location],
                            rows_written=len(listing), checks=(placed.check,))

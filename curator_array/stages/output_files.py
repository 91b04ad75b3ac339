"""Output files that grow part by part: the parts of a streamed task become row groups (or
lines) of one file, rolled over at a size.

A Common Crawl WARC of 40,000 pages streams as 150 parts; a file per part would leave 15
million small files for a 90,000-WARC snapshot, which a parallel file system's metadata
server (and a site's inode quota) will not take. So a writer keeps one growing file per task
in its process, under a hidden temporary name, appends each part in order, and renames it
to ``<task id>.<first part>.<suffix>`` when the task's final part is in, when the next part
would take it past the size, or when the block of work it came in ends (its parts may then
go on in another process). Until the rename nothing under a final name changes, and the
parts a file holds are handed on (and so recorded) only after it, so a killed task is redone
whole and leaves no partial file under a final name. Memory is one part: the file's bytes are
on disk, not held.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import pyarrow as pa

from ..core.atomic import NewFile
from ..storage.places import OutputPlace


class TableSink(Protocol):
    """An open output file that takes tables one after another (a format's writer)."""

    def accepts(self, table: pa.Table) -> bool:
        """Whether ``table`` can be appended (a Parquet file holds one schema)."""

    def write(self, table: pa.Table) -> None: ...

    def tell(self) -> int:
        """Bytes written to disk so far."""

    def closing_bytes(self, table: pa.Table) -> int:
        """The most the close may still add to the file once ``table`` is appended (a footer)."""

    def close(self) -> None: ...


def file_name(task_id: str, first_part: int, suffix: str) -> str:
    """``<task id>.<first part, 5 digits>.<suffix>``: deterministic, and sorted in part order."""
    return f"{task_id}.{first_part:05d}{suffix}"


@dataclass(frozen=True)
class PlacedFile:
    """A file in place: where it is, and the (name, size, CRC-32) its record keeps."""

    location: str
    check: tuple[str, int, int]


def place_file(place: OutputPlace, partial: NewFile, name: str) -> PlacedFile:
    """``partial`` (complete, from ``place.new_file(name)``) in place as ``name``, with the
    checksum counted as it was written, so no record ever reads an output back. The rename
    is synced by ``place.sync()``, once per task, before the task's record is."""
    partial.close()
    check = (name, *partial.check)
    return PlacedFile(place.put(partial, name), check)


def write_placed(place: OutputPlace, name: str, write: Callable[[BinaryIO], None]) -> PlacedFile:
    """The file ``name`` in ``place``, as ``write`` writes it to an open new file, put in
    place whole (nothing appears when ``write`` raises)."""
    partial = place.new_file(name)
    try:
        write(partial)
        return place_file(place, partial, name)
    finally:
        place.discard(partial)


@dataclass
class GrowingFile:
    """One file being written: where it goes, and the parts it holds so far."""

    place: OutputPlace
    name: str
    partial: NewFile
    sink: TableSink
    first_part: int
    next_part: int
    table_bytes: int = 0  # Arrow bytes of the rows appended, to estimate the next part's share on disk

    def room_for(self, table: pa.Table, limit: int) -> bool:
        """Whether ``table`` is likely to fit under ``limit``, at the compression seen so far,
        with what every part may add at the close; an empty file always takes a part (a part
        larger than the limit gets a file of its own)."""
        if not self.table_bytes:
            return True
        on_disk = self.sink.tell()
        expected = table.nbytes * on_disk / self.table_bytes
        return on_disk + expected + self.sink.closing_bytes(table) <= limit

    def append(self, table: pa.Table) -> None:
        self.sink.write(table)
        self.table_bytes += table.nbytes

    def commit(self) -> PlacedFile:
        """Complete it: closed, then put in place (synced and renamed, or uploaded)."""
        self.sink.close()
        return place_file(self.place, self.partial, self.name)

    def abandon(self) -> None:
        try:
            self.sink.close()
        finally:
            self.place.discard(self.partial)


class GrowingFiles:
    """The files one writer process is growing, one per key: (task id, "") for a task's output,
    (task id, "removed") for the rows its steps removed; ``open_sink`` opens a format's sink
    on a new file for a schema."""

    def __init__(self, suffix: str, open_sink: Callable[[BinaryIO, pa.Schema], TableSink], limit: int):
        self.suffix, self.open_sink, self.limit = suffix, open_sink, limit
        self.files: dict[tuple[str, str], GrowingFile] = {}

    def fits(self, key: tuple[str, str], part: int, table: pa.Table) -> bool:
        """Whether part ``part`` can go on in the key's open file (or none is open): it is the
        next part, of the file's schema, and likely to fit under the size."""
        current = self.files.get(key)
        return current is None or (current.next_part == part and current.sink.accepts(table)
                                   and current.room_for(table, self.limit))

    def append(self, key: tuple[str, str], place: OutputPlace, part: int, table: pa.Table) -> None:
        """Append part ``part`` of task ``key[0]`` to the file of ``key``, in ``place``; the
        open file is put in place first when the part cannot go on in it (out of order, of
        another schema, or it would not fit)."""
        if not self.fits(key, part, table):
            self.close(key)
        current = self.files.get(key)
        if current is None:
            name = file_name(key[0], part, self.suffix)
            partial = place.new_file(name)
            current = self.files[key] = GrowingFile(place, name, partial, self.open_sink(partial, table.schema),
                                                    part, part)
        current.append(table)
        current.next_part = part + 1

    def skip(self, key: tuple[str, str], part: int) -> None:
        """Part ``part`` has no rows for the key's file: the next part may still continue it."""
        if key in self.files and self.files[key].next_part == part:
            self.files[key].next_part = part + 1

    def get(self, key: tuple[str, str]) -> GrowingFile | None:
        return self.files.get(key)

    def of_task(self, task_id: str) -> list[tuple[str, str]]:
        return [key for key in self.files if key[0] == task_id]

    def close(self, key: tuple[str, str]) -> PlacedFile:
        done = self.files.pop(key)
        try:
            return done.commit()
        except BaseException:
            done.place.discard(done.partial)
            raise

    def abandon(self, task_id: str) -> None:
        """Drop the task's open files, unnamed: the task failed and is redone whole."""
        for key in self.of_task(task_id):
            self.files.pop(key).abandon()


def remove_leftovers(places: Sequence[OutputPlace], task_ids: Collection[str], suffix: str,
                     recorded: Collection[str]) -> tuple[int, list[str]]:
    """Once every task of ``task_ids`` is finished: remove what killed writers left of those
    tasks' files in ``places`` (hidden partial files, incomplete uploads), and, in the first
    of them (the output dir), their files under a streamed task's final name that no record
    names (``recorded``: names there). A writer killed between putting a file in place and
    recording it leaves such a file; the rerun writes the task again and, if it cut the
    task's parts otherwise (another ``--output-file-size``), under other names, so the file
    would repeat its documents. Returns how many partials went, and the unrecorded names."""
    wanted, kept = set(task_ids), set(recorded)

    def owned(name: str, whole: bool = True) -> bool:
        if not name.endswith(suffix):
            return False
        stem = name[:-len(suffix)]
        streamed = re.fullmatch(r"(.+)\.\d{5}", stem)
        return (streamed is not None and streamed.group(1) in wanted) or (whole and stem in wanted)

    partials = sum(place.clear_partials(owned) for place in places)
    unrecorded = [name for name in places[0].names() if name not in kept and owned(name, whole=False)] if places else []
    for name in unrecorded:
        places[0].remove(name)
    return partials, sorted(unrecorded)

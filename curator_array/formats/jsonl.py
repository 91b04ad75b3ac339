"""JSON Lines: one JSON object per line, optionally gzip-compressed (``.jsonl.gz``)."""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.json as pa_json

from ..core.records.shard import MALFORMED_LINES
from ..stages.io import (
    MIN_CUT_BYTES,
    Added,
    FileContents,
    MalformedRecordError,
    ReaderStage,
    WriterStage,
)
from ..stages.tasks import FileCut
from ..storage.places import fetched, placing

BLOCK_BYTES = 4 << 20  # JSON parsed at once by ``JsonlReader.read_columns``
logger = logging.getLogger(__name__)

def _open_text(path: str):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def _read_slowly(lines: Iterable[str | bytes], path: str, policy: str, first_number: int = 1) -> FileContents:
    """Line-by-line reading that knows line numbers: used when the fast reader refuses a file
    (``lines`` are the file's from line ``first_number`` on)."""
    rows: list[dict[str, Any]] = []
    skipped = 0
    for number, line in enumerate(lines, start=first_number):
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
    return FileContents(_table_of(rows, path), {MALFORMED_LINES: skipped} if skipped else {})


def _table_of(rows: list[dict[str, Any]], path: str) -> pa.Table:
    """The records as a table. A field whose values are strings in some records and another
    type in others (a text that is a number) keeps its strings, and the other values become
    null, so that the filters drop and count those records rather than fail the file; the
    log names the field and how many values."""
    try:
        return pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    for name in dict.fromkeys(key for row in rows for key in row):
        values = [row.get(name) for row in rows]
        if any(isinstance(v, str) for v in values) and any(v is not None and not isinstance(v, str) for v in values):
            others = 0
            for row in rows:
                if name in row and row[name] is not None and not isinstance(row[name], str):
                    row[name], others = None, others + 1
            logger.warning("%s: %d value(s) of field %r are not strings where others are: read as null", path,
                           others, name)
    try:
        return pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise MalformedRecordError(f"{path}: records whose fields do not share a type ({exc})") from None


def read_jsonl(path: str, policy: str = "fail") -> FileContents:
    if os.path.getsize(path) == 0:
        return FileContents(pa.table({}))
    try:
        return FileContents(pa_json.read_json(path))
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        with _open_text(path) as lines:
            return _read_slowly(lines, path, policy)


def _line_start(handle: BinaryIO, offset: int, size: int) -> int:
    """Where the first line that begins at or after ``offset`` begins (``size``: none does)."""
    if offset <= 0 or offset >= size:
        return min(max(offset, 0), size)
    handle.seek(offset - 1)
    handle.readline()  # the rest of the line ``offset`` falls in (just its newline when it begins there)
    return handle.tell()


def _lines_before(path: str, offset: int) -> int:
    with open(path, "rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(min(BLOCK_BYTES, offset - handle.tell())),
                                                         b""))


def read_jsonl_cut(path: str, cut: FileCut, policy: str = "fail") -> FileContents:
    """The lines of a plain JSONL file that begin in ``cut``'s share of its bytes: the cuts of
    a file together read each line once, whatever the cut points."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start, end = (_line_start(handle, offset, size) for offset in cut.share(size))
        handle.seek(start)
        data = handle.read(end - start)
    if not data.strip():
        return FileContents(pa.table({}))
    try:
        return FileContents(pa_json.read_json(pa.BufferReader(data)))
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return _read_slowly(data.split(b"\n"), path, policy, _lines_before(path, start) + 1)


class JsonlReader(ReaderStage):
    """``malformed="fail"`` (default) fails the task naming the file and line; ``"skip"``
    drops bad lines and counts them in the manifest."""

    name = "jsonl_reader"
    pinned = ("malformed",)
    format_name = "jsonl"
    skips_malformed = True

    def read_file(self, path: str) -> FileContents:
        return read_jsonl(path, self.malformed)

    def cut_units(self, path: str, finer: int = 1) -> int:
        """Plain JSONL only: a compressed stream cannot be entered in the middle."""
        return os.path.getsize(path) * finer // MIN_CUT_BYTES if path.endswith(".jsonl") else 1

    def read_cut(self, path: str, cut: FileCut) -> FileContents:
        return read_jsonl_cut(path, cut, self.malformed)

    def schema(self, path: str) -> pa.Schema:
        """The types the first block's rows give (a later row may widen a type)."""
        try:
            return _parse(next(_line_blocks(path), b""), pa_json.ParseOptions()).schema
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
            return super().schema(path)

    def read_columns(self, path: str, columns: Collection[str]) -> Iterator[pa.Table]:
        """Blocks of whole lines parsed as they are read, only ``columns`` kept, as strings
        (other fields are skipped unparsed, so their types never matter); a file whose first
        block the block parser refuses is read whole. Memory is one block, however large the
        file: Arrow's streaming JSON reader reads ahead, up to the whole file."""
        if os.path.getsize(path) == 0:
            return
        options = pa_json.ParseOptions(explicit_schema=pa.schema([(name, pa.string()) for name in columns]),
                                       unexpected_field_behavior="ignore")
        blocks = _line_blocks(path)
        try:
            first = _parse(next(blocks, b""), options)
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
            yield from super().read_columns(path, columns)
            return
        yield first
        for block in blocks:
            try:
                yield _parse(block, options)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise MalformedRecordError(f"{path}: malformed JSON record ({exc})") from None


def _line_blocks(path: str) -> Iterator[bytes]:
    """The file (decompressed) in blocks of about ``BLOCK_BYTES`` that end at a line's end."""
    with pa.input_stream(path) as stream:
        rest = b""
        while chunk := stream.read(BLOCK_BYTES):
            data = rest + chunk
            end = data.rfind(b"\n") + 1
            if end:
                yield data[:end]
            rest = data[end:]
        if rest.strip():
            yield rest


def _parse(block: bytes, options: pa_json.ParseOptions) -> pa.Table:
    return pa_json.read_json(pa.BufferReader(block), parse_options=options,
                             read_options=pa_json.ReadOptions(use_threads=False, block_size=len(block) + 1))


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


GZIP_PENDING_BYTES = 64 << 10


def _write_lines(handle: BinaryIO, table: pa.Table) -> None:
    for batch in table.to_batches(max_chunksize=4096):
        handle.write("".join(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n"
                             for row in batch.to_pylist()).encode())


class JsonlSink:
    """A JSONL file (``packed`` on ``raw``: gzip, or the file itself) taking lines as tables come."""

    def __init__(self, raw: BinaryIO, packed: BinaryIO):
        self.raw, self.packed = raw, packed

    def accepts(self, table: pa.Table) -> bool:
        return True

    def write(self, table: pa.Table) -> None:
        _write_lines(self.packed, table)

    def tell(self) -> int:
        return self.raw.tell()

    def closing_bytes(self, table: pa.Table) -> int:
        """What gzip holds back until the close (its pending block), at most; plain lines, nothing."""
        return 0 if self.packed is self.raw else GZIP_PENDING_BYTES

    def close(self) -> None:
        if self.packed is not self.raw:
            self.packed.close()
        self.raw.close()


class JsonlWriter(WriterStage):
    name = "jsonl_writer"
    pinned = ()  # where it writes is not what it writes
    format_name = "jsonl"
    suffix = ".jsonl"

    @contextmanager
    def _packing(self, raw: BinaryIO) -> Iterator[BinaryIO]:
        """What lines go to on ``raw`` for the block's length; ``raw`` stays open."""
        yield raw

    def _read_bytes(self, path: Path) -> BinaryIO:
        return open(path, "rb")

    def write_table(self, table: pa.Table, file: BinaryIO) -> None:
        with self._packing(file) as lines:
            _write_lines(lines, table)

    def open_sink(self, file: BinaryIO, schema: pa.Schema) -> JsonlSink:
        return JsonlSink(file, self._packed(file))

    def _packed(self, raw: BinaryIO) -> BinaryIO:
        """What lines are written to, on top of the file."""
        return raw

    def rewrite(self, source: str | Path, target: str | Path, reader, rows: Collection[int], *, only: bool = False,
                added: Mapping[str, Added] | None = None,
                replaced: Mapping[str, Mapping[int, Any]] | None = None) -> tuple[int, int]:
        """Line by line: a written record keeps its bytes, the ``added`` fields appended to its
        object (rows are the non-blank lines, as the reader counts); a record with ``replaced``
        fields is written again, as the writer writes records."""
        read = written = 0
        names = [json.dumps(name, ensure_ascii=False).encode() for name in (added or {})]
        columns = list((added or {}).values())
        with fetched(source) as local, self._read_bytes(local) as lines, placing(target) as partial, \
                self._packing(partial) as out:
            for line in lines:
                if not line.strip():
                    continue
                if (read in rows) == only:
                    changes = {name: values[read] for name, values in (replaced or {}).items() if read in values}
                    if changes:
                        line = json.dumps({**json.loads(line), **changes}, ensure_ascii=False,
                                          default=_json_default).encode() + b"\n"
                    if names:
                        record = line.rstrip()[:-1]  # the object without its closing brace
                        fields = b", ".join(name + b": " + json.dumps(values.get(read, default), ensure_ascii=False,
                                                                      default=_json_default).encode()
                                            for name, (values, default) in zip(names, columns))
                        line = record + (b", " if record.strip() != b"{" else b"") + fields + b"}\n"
                    out.write(line if line.endswith(b"\n") else line + b"\n")
                    written += 1
                read += 1
        return read, written


class GzipJsonlWriter(JsonlWriter):
    name = "jsonl_gz_writer"
    pinned = ()  # where it writes is not what it writes
    format_name = "jsonl.gz"
    suffix = ".jsonl.gz"

    @contextmanager
    def _packing(self, raw: BinaryIO) -> Iterator[BinaryIO]:
        with self._packed(raw) as packed:  # closing the gzip stream leaves ``raw`` open
            yield packed

    def _packed(self, raw: BinaryIO) -> BinaryIO:
        # No name and mtime 0 in the header: the same rows give the same bytes, so a replayed
        # shard is byte-identical (the temporary file name would differ every time).
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)  # type: ignore[return-value]

    def _read_bytes(self, path: Path) -> BinaryIO:
        return gzip.open(path, "rb")

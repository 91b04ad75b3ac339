"""WARC (Web ARChive), plain or gzip-compressed per record: read with FastWARC.

Only ``response`` records with an HTML payload become rows: ``id`` (the WARC-Record-ID),
``url``, ``date``, ``content_type`` and ``html``. Other responses are counted in the
manifest, not read: non-HTML payloads, truncated records, HTTP errors. A file is read in
parts of ``records_per_batch`` rows, so a reader's memory does not grow with the file.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa

from ..core.errors import ConfigError
from ..stages.defaults import MALFORMED_POLICIES, WARC_RECORDS_PER_BATCH
from ..stages.io import FileContents, MalformedRecordError, ReaderStage
from ..stages.requirements import Requirement, module

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
NON_HTML, TRUNCATED, HTTP_ERROR = "non_html_records", "truncated_records", "http_error_records"
SCHEMA = pa.schema([("id", pa.string()), ("url", pa.string()), ("date", pa.string()),
                    ("content_type", pa.string()), ("html", pa.large_string())])


def first_bad_gzip_member(path: str, start: int) -> int | None:
    """Offset of the first gzip member at or after ``start`` that does not decompress whole.

    Used only to say where a file is broken; FastWARC does the reading.
    """
    with open(path, "rb") as handle:
        handle.seek(start)
        member_start = fed = start
        decompressor = zlib.decompressobj(31)
        carry = b""
        while True:
            chunk = carry or handle.read(1 << 16)
            carry = b""
            if not chunk:
                return member_start if fed > member_start else None
            try:
                decompressor.decompress(chunk)
            except zlib.error:
                return member_start
            fed += len(chunk)
            if decompressor.eof:
                carry = decompressor.unused_data
                fed -= len(carry)
                member_start = fed
                decompressor = zlib.decompressobj(31)


def _decode(data: bytes, charset: str | None) -> str:
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    return bytes_to_str(data, charset or detect_encoding(data))


class WarcReader(ReaderStage):
    """Streams the HTML responses of WARC files (``.warc``, ``.warc.gz``) as documents."""

    name = "warc_reader"
    format_name = "warc"
    streams = True
    pinned = ("malformed", "records_per_batch")
    columns = tuple(SCHEMA.names)

    def needs(self) -> tuple[Requirement, ...]:
        return (module("fastwarc"),)

    def __init__(self, malformed: str = MALFORMED_POLICIES[0], records_per_batch: int = WARC_RECORDS_PER_BATCH):
        if records_per_batch < 1:
            raise ConfigError(f"records_per_batch must be >= 1, got {records_per_batch}")
        self.records_per_batch = records_per_batch
        super().__init__(malformed)

    def read_parts(self, path: str) -> Iterator[FileContents]:
        try:
            from fastwarc.warc import ArchiveIterator, WarcRecordType
        except ImportError:
            raise ConfigError("reading WARC needs the web extras: pip install 'curator-array[web]'") from None
        rows: list[dict] = []
        skipped: Counter[str] = Counter()
        last_good = 0
        try:
            for record in ArchiveIterator(path, record_types=WarcRecordType.response, parse_http=True,
                                          fsspec_args=False):
                last_good = record.stream_pos
                row = self._row(record, skipped)
                if row is not None:
                    rows.append(row)
                if len(rows) >= self.records_per_batch:
                    yield FileContents(pa.Table.from_pylist(rows, schema=SCHEMA), dict(skipped), last_good)
                    rows, skipped = [], Counter()
        except OSError as exc:
            raise MalformedRecordError(self._where_broken(path, last_good, exc)) from None
        yield FileContents(pa.Table.from_pylist(rows, schema=SCHEMA), dict(skipped))

    @staticmethod
    def _row(record, skipped: Counter) -> dict | None:
        headers = record.http_headers
        if headers is not None and headers.status_code >= 300:
            skipped[HTTP_ERROR] += 1
            return None
        content_type = (record.http_content_type or "").split(";")[0].strip().lower()
        if content_type not in HTML_TYPES:
            skipped[NON_HTML] += 1
            record.reader.consume()
            return None
        data = record.reader.read()
        if record.headers.get("WARC-Truncated") or len(data) < record.content_length:
            skipped[TRUNCATED] += 1
            return None
        return {
            "id": record.record_id,
            "url": record.headers.get("WARC-Target-URI"),
            "date": record.headers.get("WARC-Date"),
            "content_type": content_type,
            "html": _decode(data, record.http_charset),
        }

    @staticmethod
    def _where_broken(path: str, last_good: int, exc: OSError) -> str:
        if path.endswith(".gz"):
            offset = first_bad_gzip_member(path, last_good)
            if offset is not None:
                return f"{path}: corrupt gzip member at byte offset {offset} ({exc})"
        return f"{path}: unreadable WARC data after the record at byte offset {last_good} ({exc})"

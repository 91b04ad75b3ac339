"""Writing small WARC files for tests and benchmarks (reading them is FastWARC's job).

Each record is its own gzip member, as in Common Crawl, so a test can corrupt or cut one
member and know its byte offset.
"""

from __future__ import annotations

import gzip
import uuid
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    url: str
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    truncate_to: int | None = None  # cut the record's block after this many bytes
    status: int = 200


def record_bytes(page: Page, date: str = "2024-05-01T12:00:00Z") -> bytes:
    http = (f"HTTP/1.1 {page.status} OK\r\nContent-Type: {page.content_type}\r\n"
            f"Content-Length: {len(page.body)}\r\n\r\n").encode() + page.body
    block = http if page.truncate_to is None else http[: page.truncate_to]
    record_id = uuid.uuid5(uuid.NAMESPACE_URL, page.url)
    head = (
        "WARC/1.0\r\nWARC-Type: response\r\n"
        f"WARC-Record-ID: <urn:uuid:{record_id}>\r\nWARC-Date: {date}\r\nWARC-Target-URI: {page.url}\r\n"
        f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(http)}\r\n\r\n"
    ).encode()
    return head + block + b"\r\n\r\n"


def record_id_of(url: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url)}>"


def write_warc(path, pages: Iterable[Page], compress: bool = True) -> list[int]:
    """Write ``pages`` as one record each; returns each record's byte offset in the file."""
    offsets, position = [], 0
    with open(path, "wb") as handle:
        for page in pages:
            data = record_bytes(page)
            if compress:
                data = gzip.compress(data, mtime=0)
            offsets.append(position)
            handle.write(data)
            position += len(data)
    return offsets

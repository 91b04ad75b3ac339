"""``UrlListStage``: a source that turns URL lists into deterministic download tasks.

A list is a text file with one URL per line, or JSONL with a ``url`` field (and optional
``sha256``/``size`` to verify against). A URL is http(s)://, file:// or s3://bucket/key; the
buckets named are checked before any work (one missing, or closed to the credentials, is
refused). Several files or a directory of them may be given.
A Common Crawl paths file (``warc.paths`` or ``warc.paths.gz``: one path per line, relative
to the archive) is a list too: its paths are joined to ``paths_base_url``, and
``paths_slice`` takes a slice of each such file (the first 1,000 files of a snapshot).
Task ids come from the URLs themselves, never their position, so adding a line elsewhere
does not move other tasks to other shards.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, InputError
from ..storage.s3 import check_buckets
from .base import SourceStage
from .defaults import COMMON_CRAWL_BASE_URL
from .tasks import Task

URL_SCHEMES = ("http://", "https://", "file://", "s3://")
SCHEMES_TEXT = "an http://, https://, file:// or s3:// URL"
LIST_SUFFIXES = (".txt", ".urls", ".jsonl", ".list", ".paths")
PATHS_SUFFIXES = (".paths", ".paths.gz")


@dataclass(frozen=True)
class PathsSlice:
    """``A:B`` of a paths file, as Python slices it (``:1000`` is the first 1,000 files)."""

    start: int | None = None
    stop: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> PathsSlice:
        if not text:
            return cls()
        start, colon, stop = text.partition(":")
        try:
            if not colon:
                raise ValueError
            bounds = [int(value) if value.strip() else None for value in (start, stop)]
        except ValueError:
            raise ConfigError(f"crawl files {text!r}: give a slice START:STOP of the paths list, e.g. 0:1000") from None
        if any(value is not None and value < 0 for value in bounds):
            raise ConfigError(f"crawl files {text!r}: positions count from 0")
        return cls(*bounds)

    def __str__(self) -> str:
        return f"{'' if self.start is None else self.start}:{'' if self.stop is None else self.stop}"

    def take(self, items: list) -> list:
        return items[self.start:self.stop]


def is_paths_file(path: Path) -> bool:
    return path.name.endswith(PATHS_SUFFIXES)


@dataclass
class UrlGroupTask(Task):
    """URLs downloaded (and then read) as one unit; ``expected`` holds optional checksums."""

    urls: list[str] = field(default_factory=list)
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)


def url_group_id(urls: Sequence[str]) -> str:
    return "url-" + hashlib.sha256("\n".join(sorted(urls)).encode()).hexdigest()[:32]


def _list_files(paths: Sequence[str | Path]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")
                            and (p.suffix in LIST_SUFFIXES or is_paths_file(p)))
        elif path.is_file():
            found.append(path)
        else:
            raise ConfigError(f"URL list {path} does not exist")
    return found


def paths_lines(data: bytes, where: str, packed: bool = True) -> list[tuple[int, str]]:
    """(line number, path) of every entry of a paths list (gzipped when ``packed``)."""
    try:
        text = (gzip.decompress(data) if packed else data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read paths file {where}: {exc}") from None
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _paths_entries(path: Path, base_url: str, chosen: PathsSlice) -> list[tuple[str, dict[str, Any], str]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read paths file {path}: {exc}") from None
    numbered = paths_lines(data, str(path), path.name.endswith(".gz"))
    base = base_url if base_url.endswith("/") else base_url + "/"
    return [(line if line.startswith(URL_SCHEMES) else base + line.lstrip("/"), {}, f"{path}:{number}")
            for number, line in chosen.take(numbered)]


def read_url_lists(paths: Sequence[str | Path], paths_base_url: str = COMMON_CRAWL_BASE_URL,
                   paths_slice: PathsSlice = PathsSlice()) -> list[tuple[str, dict[str, Any], str]]:
    """(url, expected, where) for every entry; ``where`` is ``file:line`` for error messages."""
    entries = []
    for path in _list_files(paths):
        if is_paths_file(path):
            entries += _paths_entries(path, paths_base_url, paths_slice)
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read URL list {path}: {exc}") from None
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            where = f"{path}:{number}"
            expected: dict[str, Any] = {}
            if text.startswith("{"):
                try:
                    record = json.loads(text)
                except ValueError as exc:
                    raise InputError(f"{where}: malformed JSON ({exc})") from None
                url = record.get("url") if isinstance(record, dict) else None
                if not isinstance(url, str):
                    raise InputError(f"{where}: JSON record without a string 'url' field")
                expected = {k: record[k] for k in ("sha256", "size") if record.get(k) is not None}
            else:
                url = text
            if not url.startswith(URL_SCHEMES):
                raise InputError(f"{where}: {url!r} is not {SCHEMES_TEXT}")
            entries.append((url, expected, where))
    return entries


class UrlListStage(SourceStage):
    name = "url_list"
    # Where the lists live is not what they say; the listing digest pins their content.
    pinned = ("paths_base_url", "paths_slice", "urls_per_partition")

    def __init__(self, url_lists: Sequence[str | Path], urls_per_partition: int = 1,
                 paths_base_url: str = COMMON_CRAWL_BASE_URL, paths_slice: str | None = None):
        if urls_per_partition < 1:
            raise ConfigError(f"urls per partition must be >= 1, got {urls_per_partition}")
        if not paths_base_url.startswith(URL_SCHEMES):
            raise ConfigError(f"crawl base URL {paths_base_url!r} is not {SCHEMES_TEXT}")
        self.url_lists = list(url_lists)
        self.urls_per_partition = urls_per_partition
        self.paths_base_url = paths_base_url
        self.paths_slice = str(PathsSlice.parse(paths_slice))

    def list_tasks(self) -> list[UrlGroupTask]:
        entries = read_url_lists(self.url_lists, self.paths_base_url, PathsSlice.parse(self.paths_slice))
        if not entries:
            where = ", ".join(map(str, self.url_lists))
            raise ConfigError(f"no URLs in {where}" + (f" (paths slice {self.paths_slice})"
                                                        if self.paths_slice != str(PathsSlice.parse(None)) else ""))
        check_buckets(url for url, _, _ in entries)
        seen: dict[str, str] = {}
        for url, _, where in entries:
            if url in seen:
                raise ConfigError(f"URL {url} is listed twice ({seen[url]} and {where}); each URL must appear once")
            seen[url] = where
        entries.sort(key=lambda entry: entry[0])
        tasks = []
        for start in range(0, len(entries), self.urls_per_partition):
            group = entries[start : start + self.urls_per_partition]
            urls = [url for url, _, _ in group]
            tasks.append(UrlGroupTask(url_group_id(urls), urls=urls, expected={u: e for u, e, _ in group if e}))
        return tasks

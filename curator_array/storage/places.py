"""Where a writer puts its files: a directory, or a prefix in an object store (``s3://``).

A file must appear under its final name only when it is whole, in both. In a directory that
is a hidden sibling, synced and renamed. A store has no rename: the file is written to a
local spool file first (``$TMPDIR``), then uploaded, and an upload of more than one part is
completed only when every part is in; until then the store shows no object. An element
killed mid-upload leaves an incomplete multipart upload (billed, invisible), which
``clear_partials`` aborts when the task is redone, as it removes a killed writer's hidden
files in a directory.

Writes to a store go through boto3 (s3transfer), reads through pyarrow (``storage.s3``):
pyarrow's output stream completes a multipart upload when it is closed, from its destructor
too, so a writer failing mid-file would publish a truncated object, and it can neither list
nor abort uploads; boto3 does all three. Reads and writes are tried ``STORE_ATTEMPTS`` times
with backoff (503 SlowDown, 429), the count crawl downloads default to.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from ..core.atomic import KeptOpen, NewFile, fsync_directory, temporary_sibling
from ..core.errors import ConfigError
from ..core.task_records import file_check
from .s3 import (
    STORE_ATTEMPTS,
    S3Url,
    StoreError,
    StoreSettings,
    check_buckets,
    download,
    filesystem,
    is_s3,
    retrying,
    store_error,
)

PART_BYTES = 8 << 20  # a multipart upload's part; files up to this size go in one request
UPLOAD_THREADS = 4  # parts in flight per file: bounds the memory an upload holds to 32 MiB
_PARTIAL = re.compile(r"^\.(?P<final>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]+$")  # core.atomic.temporary_sibling's names


class OutputPlace(Protocol):
    """What a writer needs of where its files go."""

    def location(self, name: str) -> str:
        """How the file ``name`` is named to users and in manifests (a path or an URL)."""

    def check(self, what: str) -> None:
        """Refuse (``ConfigError``) a place that cannot be written: before any work."""

    def new_file(self, name: str) -> NewFile:
        """A local file, open, to write the bytes of ``name`` to before ``put`` puts them in place."""

    def put(self, written: NewFile, name: str) -> str:
        """``written`` (from ``new_file``, closed) in place as ``name``, whole; returns its location."""

    def sync(self) -> None:
        """Make the files put here so far survive a crash of the node (a directory's renames)."""

    def discard(self, written: NewFile) -> None: ...

    def names(self) -> list[str]:
        """The visible files directly under this place."""

    def remove(self, name: str) -> None: ...

    def clear_partials(self, owned: Callable[[str], bool]) -> int:
        """Remove what killed writers left of the files whose final name ``owned`` accepts
        (hidden partial files, incomplete uploads); returns how many."""

    def problem(self, name: str, size: int, crc: int) -> str | None:
        """Why the file ``name`` (under this place) is not the one a record says was written."""


def _running_here(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host: a partial file it names may be another
    attempt's, being written now (two attempts of one shard at once), not a killed writer's."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class LocalPlace:
    directory: Path

    def location(self, name: str) -> str:
        return str(self.directory / name)

    def check(self, what: str) -> None:
        pass  # a directory is made as it is written; an unwritable one fails the first task, with its path

    def new_file(self, name: str) -> NewFile:
        return NewFile(temporary_sibling(self.directory / name))  # the directory is made when missing

    def put(self, written: NewFile, name: str) -> str:
        """A rename: the file synced itself when it was closed."""
        final = self.directory / name
        written.close()
        os.replace(written.path, final)
        return str(final)

    def sync(self) -> None:
        fsync_directory(self.directory, _DIRECTORIES)

    def discard(self, written: NewFile) -> None:
        _close_quietly(written)
        written.path.unlink(missing_ok=True)

    def names(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.directory) if not e.name.startswith(".") and e.is_file())
        except FileNotFoundError:
            return []

    def remove(self, name: str) -> None:
        (self.directory / name).unlink(missing_ok=True)

    def clear_partials(self, owned: Callable[[str], bool]) -> int:
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return 0
        removed = 0
        for entry in entries:
            partial = _PARTIAL.match(entry.name)
            if partial and owned(partial.group("final")) and not _running_here(int(partial.group("pid"))):
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
        return removed

    def problem(self, name: str, size: int, crc: int) -> str | None:
        path = self.directory / name
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            return f"{name} is missing"
        if actual != size:
            return f"{name} has {actual} bytes, {size} were written"
        if file_check(path)[1] != crc:
            return f"{name} changed since it was written (checksum)"
        return None


@lru_cache(maxsize=4)
def _client(settings: StoreSettings, attempts: int):
    import boto3
    from botocore.config import Config

    endpoint = f"{settings.scheme}://{settings.endpoint}" if settings.endpoint else None
    return boto3.session.Session().client(
        "s3", region_name=settings.region, endpoint_url=endpoint,
        config=Config(retries={"mode": "standard", "max_attempts": attempts}))


@lru_cache(maxsize=1)
def _spool_dir() -> Path:
    """This user's spool directory on this node; the first use in a process removes what
    writers killed here left (files named after a pid that no longer runs), which would
    otherwise fill ``$TMPDIR`` by a file's size per kill."""
    directory = Path(tempfile.gettempdir()) / f"curator-array-spool-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    for entry in os.scandir(directory):
        pid = entry.name.partition("-")[0]
        if pid.isdigit() and not _running(int(pid)):
            Path(entry.path).unlink(missing_ok=True)
    return directory


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: a probe, nothing is sent
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class StorePlace:
    """A prefix in an S3 store; the store and the keys come from the environment (``storage.s3``)."""

    url: S3Url
    attempts: int = STORE_ATTEMPTS

    def _key(self, name: str) -> str:
        return f"{self.url.key}/{name}" if self.url.key else name

    def _client(self):
        return _client(StoreSettings.from_env(os.environ), self.attempts)

    def location(self, name: str) -> str:
        return self.url.join(name)

    def check(self, what: str) -> None:
        try:
            check_buckets([str(self.url)])
        except ConfigError as exc:
            raise ConfigError(f"{what} {self.url}: {exc}") from None

    def new_file(self, name: str) -> NewFile:
        return NewFile(_spool_dir() / f"{os.getpid()}-{secrets.token_hex(4)}-{name}", sync=False)

    def put(self, written: NewFile, name: str) -> str:
        try:
            written.close()
            return self.upload(written.path, name)
        finally:
            written.path.unlink(missing_ok=True)

    def upload(self, local: Path, name: str) -> str:
        """The local file ``local`` as the object ``name``, whole; returns its location."""
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES,
                                max_concurrency=UPLOAD_THREADS)
        try:
            self._client().upload_file(str(local), self.url.bucket, self._key(name), Config=config)
        except Exception as exc:  # noqa: BLE001 - boto3's errors have no common base with the transfer's
            raise OSError(store_error(exc, self.location(name)).args[0]) from None
        return self.location(name)

    def sync(self) -> None:
        pass  # an object is durable once its upload is complete

    def discard(self, written: NewFile) -> None:
        _close_quietly(written)
        written.path.unlink(missing_ok=True)

    def names(self) -> list[str]:
        import pyarrow.fs as pafs

        try:
            infos = filesystem().get_file_info(pafs.FileSelector(self.url.path, allow_not_found=True))
        except OSError as exc:
            raise store_error(exc, str(self.url)) from None
        return sorted(info.base_name for info in infos
                      if info.type == pafs.FileType.File and not info.base_name.startswith("."))

    def remove(self, name: str) -> None:
        try:
            self._client().delete_object(Bucket=self.url.bucket, Key=self._key(name))
        except Exception as exc:  # noqa: BLE001
            raise store_error(exc, self.location(name)) from None

    def uploads(self) -> list[tuple[str, str]]:
        """(name, upload id) of the incomplete multipart uploads directly under this prefix."""
        prefix = self._key("")
        found = []
        try:
            for page in self._client().get_paginator("list_multipart_uploads").paginate(
                    Bucket=self.url.bucket, Prefix=prefix):
                found += [(upload["Key"][len(prefix):], upload["UploadId"]) for upload in page.get("Uploads", ())]
        except Exception as exc:  # noqa: BLE001
            raise store_error(exc, str(self.url)) from None
        return [(name, upload) for name, upload in found if "/" not in name]

    def clear_partials(self, owned: Callable[[str], bool]) -> int:
        aborted = 0
        for name, upload in self.uploads():
            if owned(name):
                try:
                    self._client().abort_multipart_upload(Bucket=self.url.bucket, Key=self._key(name), UploadId=upload)
                except Exception as exc:  # noqa: BLE001
                    raise store_error(exc, self.location(name)) from None
                aborted += 1
        return aborted

    def problem(self, name: str, size: int, crc: int) -> str | None:
        """Size only: reading every object back to checksum it would cost a download of the
        shard's outputs at each resume, and a store's objects are replaced, never edited."""
        import pyarrow.fs as pafs

        try:
            info = filesystem().get_file_info(self.url.path + "/" + name)
        except OSError as exc:
            return store_error(exc, self.location(name)).args[0]
        if info.type != pafs.FileType.File:
            return f"{name} is missing"
        return None if info.size == size else f"{name} has {info.size} bytes, {size} were written"


def split_location(location: str | os.PathLike) -> tuple[OutputPlace, str]:
    """The place a file at ``location`` goes in, and its name there."""
    url = _s3_url(location)
    if url is not None:
        key, _, name = url.key.rpartition("/")
        return StorePlace(S3Url(url.bucket, key)), name
    return LocalPlace(Path(location).parent), Path(location).name


@contextmanager
def placing(location: str | os.PathLike) -> Iterator[NewFile]:
    """A new local file to write the file at ``location`` (a path or an ``s3://`` URL) to;
    when the block ends it is put in place whole (renamed and synced, or uploaded), and when
    it raises nothing appears."""
    place, name = split_location(location)
    written = place.new_file(name)
    try:
        yield written
        place.put(written, name)
        place.sync()
    finally:
        place.discard(written)


def put_bytes(location: str | os.PathLike, data: bytes) -> None:
    """A small file at ``location``, in place whole."""
    with placing(location) as written:
        written.write(data)


_DIRECTORIES = KeptOpen(os.O_RDONLY | os.O_DIRECTORY)  # where this process's writers rename files, to sync them


def _close_quietly(written: NewFile) -> None:
    try:
        written.close()
    except OSError:
        pass  # the file is removed next: a full disk or a failed sync need not hide the first error


@contextmanager
def fetched(location: str | os.PathLike, attempts: int = STORE_ATTEMPTS) -> Iterator[Path]:
    """A local path holding the file at ``location`` for the block's length: the file itself,
    or the object downloaded to the spool (and removed after), for readers that take paths.
    A store that throttles or fails is tried ``attempts`` times in all (``s3.retrying``),
    each try resuming the copy."""
    if not is_s3(location):
        yield Path(location)
        return
    spool = _spool_dir() / f"{os.getpid()}-{secrets.token_hex(4)}-{str(location).rpartition('/')[2]}"
    try:
        try:
            retrying(lambda: download(str(location), spool), str(location), attempts)
        except StoreError as exc:
            raise OSError(str(exc)) from None
        yield spool
    finally:
        spool.unlink(missing_ok=True)


def _s3_url(location: str | os.PathLike) -> S3Url | None:
    """``location`` as an ``s3://`` URL; None for a path."""
    return S3Url.parse(str(location)) if is_s3(location) else None


def joined(location: str | os.PathLike, name: str) -> str:
    """``name`` under ``location``, a directory or an ``s3://`` prefix."""
    url = _s3_url(location)
    return url.join(name) if url is not None else str(Path(location) / name)


def place_of(location: str | os.PathLike, attempts: int = STORE_ATTEMPTS) -> LocalPlace | StorePlace:
    """The place ``location`` names: an ``s3://`` URL, else a directory."""
    url = _s3_url(location)
    return StorePlace(url, attempts) if url is not None else LocalPlace(Path(location))


__all__ = ["LocalPlace", "OutputPlace", "StoreError", "StorePlace", "fetched", "joined", "place_of", "placing", "put_bytes", "split_location"]

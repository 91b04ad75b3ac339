"""A new file is on disk when it closes; a large one is synced along the way, so the close
waits only for its last bytes."""

from __future__ import annotations

import errno
import os
import threading
import zlib

import pytest

from curator_array.core import atomic
from curator_array.core.atomic import EARLY_SYNC_BYTES, NewFile


class Syncs(list):
    """Every fsync: (thread name, the file's size then); those in the background fail when ``failing``."""

    failing = False


@pytest.fixture
def syncs(monkeypatch) -> Syncs:
    calls, real = Syncs(), os.fsync

    def fsync(fd: int) -> None:
        name = threading.current_thread().name
        calls.append((name, os.fstat(fd).st_size))
        if calls.failing and name != threading.main_thread().name:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    return calls


def write_in_pieces(path, pieces: int, sync: bool = True) -> bytes:
    data = b""
    with NewFile(path, sync=sync) as handle:
        for piece in range(pieces):
            chunk = bytes([piece]) * EARLY_SYNC_BYTES
            handle.write(chunk)
            handle.flush()
            data += chunk
    return data


def test_a_large_file_is_synced_while_it_is_written_and_whole_at_the_close(tmp_path, syncs):
    path = tmp_path / "out.parquet"
    data = write_in_pieces(path, 4)
    main = threading.main_thread().name
    early = [size for name, size in syncs if name != main]
    assert early and all(0 < size <= len(data) for size in early)
    assert syncs[-1] == (main, len(data))  # the close syncs after the last byte, in the writer's thread
    assert path.read_bytes() == data
    assert zlib.crc32(data) == zlib.crc32(path.read_bytes())


def test_a_failed_early_sync_fails_the_close_which_still_closes_the_file_once(tmp_path, syncs):
    syncs.failing = True
    handle = NewFile(tmp_path / "out.parquet")
    for piece in range(3):
        handle.write(bytes([piece]) * EARLY_SYNC_BYTES)
        handle.flush()
    with pytest.raises(OSError, match="Input/output error"):
        handle.close()
    assert handle.closed
    handle.close()  # its descriptor, maybe another file's by now, is not closed again


def test_a_small_file_is_synced_once_at_the_close(tmp_path, syncs):
    path = tmp_path / "small.jsonl"
    with NewFile(path) as handle:
        handle.write(b"x" * 1000)
    assert syncs == [(threading.main_thread().name, 1000)]


def test_a_file_that_is_not_to_be_synced_never_is(tmp_path, syncs):
    data = write_in_pieces(tmp_path / "spooled", 3, sync=False)
    assert syncs == []
    assert (tmp_path / "spooled").read_bytes() == data

"""A large file's sha256 is read once and kept while the file is unchanged; any write, and a
file renamed onto its path, make it hash again."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from curator_array.core import file_digests
from curator_array.core.file_digests import file_digest

PLANTED = "0" * 64


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(file_digests.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setattr(file_digests, "KEPT_FROM_BYTES", 1000)
    monkeypatch.setattr(file_digests, "SETTLED_S", 0.0)
    return tmp_path / "cache" / "file-digests"


def model(path, content: bytes = b"weights " * 500):
    path.write_bytes(content)
    return path


def plant(cache) -> None:
    """Every kept digest replaced by one no file has: a digest given back came from the cache."""
    for entry in cache.iterdir():
        saved = json.loads(entry.read_text())
        entry.write_text(json.dumps({**saved, "sha256": PLANTED}))


def test_a_digest_is_kept_and_used_while_the_file_is_unchanged_by_any_path_to_it(tmp_path, cache):
    path = model(tmp_path / "model.bin")
    assert file_digest(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert len(list(cache.iterdir())) == 1
    plant(cache)
    (tmp_path / "link.bin").symlink_to(path)
    assert file_digest(path) == file_digest(tmp_path / "link.bin") == PLANTED


def test_a_write_that_keeps_the_size_and_modification_time_makes_it_hash_again(tmp_path, cache):
    path = model(tmp_path / "model.bin")
    file_digest(path)
    plant(cache)
    before = path.stat()
    with open(path, "r+b") as handle:
        handle.write(b"W")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert file_digest(path) == hashlib.sha256(path.read_bytes()).hexdigest(), "the change time moved"


def test_a_file_renamed_onto_the_path_is_hashed_again(tmp_path, cache):
    path = model(tmp_path / "model.bin")
    file_digest(path)
    plant(cache)
    other = model(tmp_path / "other.bin", b"other weights " * 300)
    os.replace(other, path)
    assert file_digest(path) == hashlib.sha256(b"other weights " * 300).hexdigest()


def test_a_small_file_or_one_changed_just_before_is_not_kept(tmp_path, cache, monkeypatch):
    small = model(tmp_path / "small.bin", b"x" * 999)
    assert file_digest(small) == hashlib.sha256(b"x" * 999).hexdigest()
    assert not cache.exists()
    monkeypatch.setattr(file_digests, "SETTLED_S", 3600.0)
    file_digest(model(tmp_path / "fresh.bin"))
    assert not cache.exists(), "a coarse clock could hide a second write within the same tick"


def test_without_a_cache_directory_every_call_hashes(tmp_path, monkeypatch):
    monkeypatch.setattr(file_digests, "KEPT_FROM_BYTES", 1000)
    monkeypatch.setattr(file_digests, "SETTLED_S", 0.0)
    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setenv(file_digests.CACHE_VARIABLE, str(blocked))
    path = model(tmp_path / "model.bin")
    assert file_digest(path) == file_digest(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.delenv(file_digests.CACHE_VARIABLE)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME")
    assert file_digests.cache_dir() is None and file_digest(path) == hashlib.sha256(path.read_bytes()).hexdigest()

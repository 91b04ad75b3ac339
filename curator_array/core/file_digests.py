"""The sha256 of a file a pipeline depends on, kept per file so it is read once, not per element.

A run pins each model, tokenizer and index it reads by its sha256, so another file is
another pipeline. Every element of an array checks that again when it starts, and hashing
an 800 MB model took 1.5 CPU-seconds before the element could even launch its Ray cluster.
So the digest of a large file is kept in the user's cache with what ``stat`` says of the
file: device, inode, size, and modification and change times in nanoseconds. Any write to
the file, or a rename onto its path, changes one of them (the change time cannot be set
by any user), so a kept digest whose stat still matches is the file's. A file changed
less than ``SETTLED_S`` before it was hashed is not kept: on a file system with coarse
times, a second write within the same tick would leave the stat unchanged.

Keeping is best effort: without a writable cache directory every start hashes the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from .atomic import write_json_atomic

CACHE_VARIABLE = "CURATOR_ARRAY_CACHE_DIR"
KEPT_FROM_BYTES = 64 << 20  # smaller files hash faster than their kept digest is found
SETTLED_S = 2.0


def cache_dir() -> Path | None:
    """``$CURATOR_ARRAY_CACHE_DIR``, else ``$XDG_CACHE_HOME/curator-array``, else ``~/.cache/curator-array``."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME")
                                                else None)
    return Path(base) / "curator-array" if base else None


def _identity(stat: os.stat_result) -> dict[str, int]:
    return {"dev": stat.st_dev, "ino": stat.st_ino, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "ctime_ns": stat.st_ctime_ns}


def file_digest(path: str | os.PathLike) -> str:
    """The file's sha256, read in chunks (a model may be large), or kept from an earlier
    read of the same, unchanged file (see the module)."""
    real = os.path.realpath(path)
    with open(real, "rb") as handle:
        before = os.fstat(handle.fileno())
        entry = _entry_path(real) if before.st_size >= KEPT_FROM_BYTES else None
        kept = _kept(entry, before)
        if kept is not None:
            return kept
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
        after = os.fstat(handle.fileno())
    settled = time.time() - max(after.st_mtime, after.st_ctime) >= SETTLED_S
    if entry is not None and settled and _identity(after) == _identity(before):
        try:
            write_json_atomic(entry, {"path": real, **_identity(after), "sha256": digest})
        except OSError:
            pass
    return digest


def _entry_path(real: str) -> Path | None:
    directory = cache_dir()
    return directory / "file-digests" / f"{hashlib.sha256(real.encode()).hexdigest()[:32]}.json" if directory else None


def _kept(entry: Path | None, stat: os.stat_result) -> str | None:
    if entry is None:
        return None
    try:
        saved = json.loads(entry.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or {key: saved.get(key) for key in _identity(stat)} != _identity(stat):
        return None
    digest = saved.get("sha256")
    return digest if isinstance(digest, str) and len(digest) == 64 else None

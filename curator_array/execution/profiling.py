"""``--profile``: a cProfile of every worker process, written under the checkpoint.

A Ray worker runs many Ray tasks; one profile per process collects them all and is
rewritten (atomically) after each, so a killed run still leaves what its workers had
done. The profile stays on while Ray takes a task's outputs between yields: that time is
part of what the stage costs. Read one with ``python -m pstats FILE`` or snakeviz.
"""

from __future__ import annotations

import cProfile
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..stages.meter import NODE

_lock = threading.Lock()
_profile: cProfile.Profile | None = None
_active = 0


@contextmanager
def profiled(directory: str | None) -> Iterator[None]:
    """Profile the body into this process's file under ``directory``; nothing when None."""
    global _profile, _active
    if directory is None:
        yield
        return
    with _lock:
        if _profile is None:
            _profile = cProfile.Profile()
        if _active == 0:
            _profile.enable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                _profile.disable()
                _dump(_profile, Path(directory))


def _dump(profile: cProfile.Profile, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{NODE}-{os.getpid()}.prof"
    temporary = path.with_name(path.name + ".tmp")
    profile.dump_stats(temporary)
    os.replace(temporary, path)

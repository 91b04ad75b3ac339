"""The allocator of the helper processes that do a run's heaviest library work.

Tokenizing and HTML extraction allocate and free a small object per token, node or piece of
text; glibc's ``malloc`` is a third of ``tokenizers``' time and trafilatura runs 8% faster
without it. An allocator is chosen when a process starts, so the processes we start for that
work (the tokenize encoder, the extraction sandbox's fork server and its children) get
mimalloc, from the ``cmeel-mimalloc`` wheel, first in ``LD_PRELOAD``; Ray's processes and the
element keep glibc's and their memory. The run option ``--allocator system``
(``CURATOR_ARRAY_ALLOCATOR``) keeps glibc's everywhere; the stages that start helpers are
given its value.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from importlib import metadata

logger = logging.getLogger(__name__)

ALLOCATORS = ("mimalloc", "system")
MIMALLOC = ALLOCATORS[0]
MIMALLOC_LIBRARY = "libmimalloc.so.3"


@lru_cache(maxsize=1)
def bundled_mimalloc() -> str | None:
    """The mimalloc library the ``cmeel-mimalloc`` wheel installed, if it is installed."""
    try:
        files = metadata.distribution("cmeel-mimalloc").files or []
    except metadata.PackageNotFoundError:
        return None
    found = [str(f.locate()) for f in files if f.name == MIMALLOC_LIBRARY]
    return found[0] if found and os.path.isfile(found[0]) else None


@lru_cache(maxsize=4)
def cannot_preload(library: str, library_path: str = "") -> str | None:
    """Why ``library`` cannot be preloaded here (with ``LD_LIBRARY_PATH`` ``library_path``),
    or None when it can. A missing dependency (mimalloc 3 needs ``libatomic.so.1``, which
    slim images lack) would make every start fail, so a Python that does nothing is
    started with it first."""
    env = {"LD_PRELOAD": library, **({"LD_LIBRARY_PATH": library_path} if library_path else {})}
    try:
        probe = subprocess.run([sys.executable, "-S", "-c", ""], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    complaint = probe.stderr.strip()
    return (complaint.splitlines() or [f"exit code {probe.returncode}"])[0] if probe.returncode or complaint else None


def helper_environment(environ: Mapping[str, str], work: str, allocator: str = MIMALLOC) -> dict[str, str]:
    """A helper's environment: ``environ`` with mimalloc first in ``LD_PRELOAD``, unless the
    run asked for the system ``allocator``, the user already preloads an allocator of their
    own, or mimalloc cannot load here (then glibc's, said once in the log, naming ``work``)."""
    env = dict(environ)
    preloaded = env.get("LD_PRELOAD", "")
    library = bundled_mimalloc()
    if allocator != MIMALLOC or library is None or "malloc" in preloaded:
        return env
    reason = cannot_preload(library, env.get("LD_LIBRARY_PATH", ""))
    if reason is not None:
        _say_once(f"{work} on the system allocator: mimalloc cannot load here ({reason})")
        return env
    env["LD_PRELOAD"] = f"{library}:{preloaded}" if preloaded else library
    return env


@contextmanager
def helpers_started_on(allocator: str, work: str) -> Iterator[None]:
    """For a library that starts its processes from this process's environment
    (``multiprocessing``'s fork server): ``LD_PRELOAD`` as ``helper_environment`` has it
    while the block runs, then as it was."""
    wanted = helper_environment(os.environ, work, allocator).get("LD_PRELOAD")
    with _ENVIRONMENT_LOCK:
        before = os.environ.get("LD_PRELOAD")
        if wanted == before:
            yield
            return
        os.environ["LD_PRELOAD"] = wanted
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("LD_PRELOAD", None)
            else:
                os.environ["LD_PRELOAD"] = before


_ENVIRONMENT_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _say_once(message: str) -> None:
    logger.warning(message)


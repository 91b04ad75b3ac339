"""The driver's standard error without Ray's error-level lines that report nothing wrong.

Ray's C++ core writes some notices at error level straight to the driver's file descriptor 2,
where no logging setting of ours reaches: every actor pool of Ray Data makes the driver print
that the actor "has constructor arguments in the object store and max_restarts > 0" (Ray Data
keeps those arguments referenced for the pool's life, and our attempts never restart an actor
anyway). A user reads an error line in a run that succeeded as a failure.

``quiet_stderr`` points descriptor 2 at a pipe read by a small child process that copies
every line to the real standard error except those matching one of ``QUIET``, each the whole
of one known message. It is a process, not a thread, so that what the driver wrote before a
crash or a SIGKILL still arrives: the child reads until the last writer (the driver, and the
Ray processes it started, which inherited the descriptor) is gone, and ignores the signals a
terminal or SLURM sends the whole group.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# Each: the whole message after glog's "[time E pid tid] " prefix, its variable parts as patterns.
QUIET = (
    r"core_worker\.cc:\d+: Actor with class name: '[^']*' and ID: '[0-9a-f]+' has constructor arguments in the "
    r"object store and max_restarts > 0\. If the arguments in the object store go out of scope or are lost, the "
    r"actor restart will fail\. See https://github\.com/ray-project/ray/issues/53727 for more details\.",
)
GLOG_PREFIX = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [EWI] \d+ \d+\] "

FILTER = r"""
import re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
quiet = re.compile(sys.argv[1])
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    if not quiet.fullmatch(line.rstrip(b"\r\n").decode("utf-8", "replace")):
        out.write(line)
        out.flush()
"""


def quiet_pattern() -> str:
    return f"{GLOG_PREFIX}(?:{'|'.join(QUIET)})"


@contextmanager
def quiet_stderr(wait_s: float = 2.0) -> Iterator[None]:
    """While inside, descriptor 2 of this process (and of what it starts) goes through the filter."""
    sys.stderr.flush()
    real = os.dup(2)
    read, write = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", FILTER, quiet_pattern()], stdin=read, stdout=real,
                             stderr=real, close_fds=True)
    os.close(read)
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe's last writer in this process is gone: the child drains and exits
        os.close(real)
        try:
            child.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass  # a process we started still holds the pipe; the child ends when it does

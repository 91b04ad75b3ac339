"""How a node's download workers share one server's patience: a request-rate cap and a
common back-off, kept in a small file every worker process on the node locks in turn.

A server that answers one request with 503 "Slow Down" or 429 is throttling the client,
not that request: every download worker of the node then waits until the back-off ends
(the server's ``Retry-After``, else an exponential delay). ``max_requests_per_second``
spaces the node's requests evenly. The state lives in the node's temporary directory
(``fcntl`` locks are per host), one file per user and download directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import tempfile
import time
from pathlib import Path

_STATE = struct.Struct("dd")  # resume_at (a back-off ends), next_slot (the rate cap's next turn)


def state_file(download_dir: str | os.PathLike) -> Path:
    """The node-local file the download workers of one download directory share."""
    key = hashlib.sha256(f"{os.getuid()}:{Path(download_dir).resolve()}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"curator-array-downloads-{key}.state"


class NodePoliteness:
    """The node's shared download pacing; every method holds the lock only to read and write."""

    def __init__(self, path: Path, max_requests_per_second: float | None = None):
        self.path = Path(path)
        self.interval = 1.0 / max_requests_per_second if max_requests_per_second else 0.0

    def _update(self, change) -> float:
        """Apply ``change(now, resume_at, next_slot) -> (resume_at, next_slot, wait)``; return the wait."""
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            raw = os.pread(descriptor, _STATE.size, 0)
            resume_at, next_slot = _STATE.unpack(raw) if len(raw) == _STATE.size else (0.0, 0.0)
            resume_at, next_slot, wait = change(time.time(), resume_at, next_slot)
            os.pwrite(descriptor, _STATE.pack(resume_at, next_slot), 0)
            return wait
        finally:
            os.close(descriptor)

    def take_turn(self) -> float:
        """Wait until this node may send its next request; the time (``time.time()``) its turn began.

        Turns are handed out under the lock, at least ``1 / max_requests_per_second`` apart
        across every worker of the node, however late a worker wakes for its own. A back-off
        that another worker starts while this one waits for its turn holds it too.
        """
        turn = 0.0

        def change(now, resume_at, next_slot):
            nonlocal turn
            turn = max(now, resume_at, next_slot)
            return resume_at, turn + self.interval, turn - now

        while True:
            wait = self._update(change)
            if wait > 0:
                time.sleep(wait)
            backing_off = self._update(lambda now, resume_at, next_slot: (resume_at, next_slot, resume_at - now))
            if backing_off <= 0:
                return turn

    def slow_down(self, seconds: float) -> None:
        """The server throttled a request: no worker of this node sends another for ``seconds``."""
        self._update(lambda now, resume_at, next_slot: (max(resume_at, now + seconds), next_slot, 0.0))

    def resumes_at(self) -> float:
        """When the node's latest back-off ends (``time.time()``); 0 if it never backed off."""
        return self._update(lambda now, resume_at, next_slot: (resume_at, next_slot, resume_at))

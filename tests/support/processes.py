"""Whether a process the test started (or its child) has ended, as a test can wait for it."""

import time
from pathlib import Path


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting to be reaped by whoever adopted it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ended_within(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``pid`` to end; whether it did."""
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True

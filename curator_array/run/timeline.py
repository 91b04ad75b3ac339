"""When the phases of one element happened, in seconds since its process started.

Recorded in the completion manifest, so a run can show where an element's time goes
(start-up, work, wind-down) without a profiler. The process start comes from the kernel
(``/proc/self/stat``), so it includes the interpreter's own start and the imports.
"""

from __future__ import annotations

import os
import time


def process_started_at() -> float:
    """The epoch time this process started (Linux), or now where that cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            ticks = int(handle.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        # Both in seconds since boot (/proc/stat's boot time has only whole seconds).
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


class Timeline:
    def __init__(self, started_at: float | None = None):
        self.started_at = process_started_at() if started_at is None else started_at
        self.marks: dict[str, float] = {}

    def mark(self, name: str, once: bool = False) -> None:
        if once and name in self.marks:
            return
        self.marks[name] = round(time.time() - self.started_at, 3)

    def as_dict(self) -> dict[str, float]:
        return dict(self.marks)

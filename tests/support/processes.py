"""The processes a test started: whether one has ended (as a test can wait for it), and what is below one."""

import time
from pathlib import Path

from curator_array.execution.ray_cluster import live_process_stats


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


def descendants(root: int) -> list[int]:
    """Every live process below ``root``, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, fields in live_process_stats():
        children.setdefault(int(fields[1]), []).append(pid)
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"

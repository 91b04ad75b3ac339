"""A progress line in the shard's log every so often: tasks done of total, rows/s, MB/s,
elapsed time and an estimate of the time left.

A log line, not a bar: array elements write to files that people tail and grep. (On a
terminal Ray Data's own progress bars show as well.) Lines come from a timer thread, so
they keep coming while a long task runs; the clock is injectable, so tests need not wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..stages.tasks import FailedTask, Task, WrittenFiles

logger = logging.getLogger(__name__)

# Seconds between progress lines in the log, unless --progress-interval says otherwise.
PROGRESS_INTERVAL_S = 30.0


def clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class ProgressReporter:
    def __init__(self, total_tasks: int, total_bytes: int | None = None, interval_s: float = PROGRESS_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, emit: Callable[[str], None] | None = None):
        self.total_tasks, self.total_bytes, self.interval_s = total_tasks, total_bytes, interval_s
        self.clock = clock
        self.emit = emit or logger.info
        self.done: set[str] = set()
        self.failed: set[str] = set()
        self.rows = self.bytes = 0
        self.began = clock()
        self._next = self.began + interval_s
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, result: Task, finished: bool) -> None:
        """Count ``result``; ``finished`` says it finished its task (the runner's
        ``TaskCompletion`` decides: the parts of a cut file come in any order). A failed task
        counts as done. What a task read counts as each part is appended (``PartShown``), not
        only when its file is in place."""
        with self._lock:
            if finished or isinstance(result, FailedTask):
                self.done.add(result.task_id)
            if isinstance(result, FailedTask):
                self.failed.add(result.task_id)
            if not (isinstance(result, WrittenFiles) and result.shown):
                self.rows += result.counters.rows_read
                self.bytes += result.counters.bytes_read

    def line(self, word: str = "progress") -> str:
        with self._lock:
            done, failed, rows, size = len(self.done), len(self.failed), self.rows, self.bytes
        elapsed = max(self.clock() - self.began, 1e-9)
        if self.total_bytes and size:
            fraction = min(1.0, size / self.total_bytes)
        else:
            fraction = done / self.total_tasks if self.total_tasks else 1.0
        eta = clock_text(elapsed * (1 - fraction) / fraction) if fraction else "unknown"
        tasks = f"{done - failed}/{self.total_tasks} tasks" + (f" ({failed} failed)" if failed else "")
        timing = f"elapsed {clock_text(elapsed)}" + ("" if word != "progress" else f", ETA {eta}")
        return f"{word}: {tasks}, {rows / elapsed:,.0f} rows/s, {size / elapsed / 1e6:,.1f} MB/s, {timing}"

    def maybe_report(self) -> bool:
        """Emit a line when an interval has passed; returns whether it did."""
        now = self.clock()
        if self.interval_s <= 0 or now < self._next:
            return False
        while self._next <= now:
            self._next += self.interval_s
        self.emit(self.line())
        return True

    def __enter__(self) -> ProgressReporter:
        if self.interval_s > 0:
            self._thread = threading.Thread(target=self._tick, name="curator-array-progress", daemon=True)
            self._thread.start()
        return self

    def _tick(self) -> None:
        while not self._stopped.wait(min(1.0, self.interval_s)):
            self.maybe_report()

    def __exit__(self, error_type, *_) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.interval_s > 0 and error_type is None:  # after a stop, the shard says what is on record
            with self._lock:
                ended_well = not self.failed and len(self.done) >= self.total_tasks
            self.emit(self.line("finished" if ended_well else "incomplete"))

"""Stop requests that arrive as signals: the time-limit warning, preemption, scancel, Ctrl-C.

A ``StopController`` belongs to one run. The ``run`` command creates it and installs its
handlers; library calls create none, so importing or calling curator-array from another
program never changes that program's signal handling.

The first signal raises :class:`ShardStopped` in the main thread, so the run unwinds
through its context managers (and the private Ray cluster is stopped on the way out). The
request is also remembered, because a signal can land inside library code that swallows
what it raises; the run loop then stops at its next check. Later signals are only
recorded, so they cannot interrupt that cleanup.

Callbacks registered with :meth:`StopController.on_stop` run first: when SLURM cancels a
step it signals every process of it at once, so the Ray processes are dying too and Ray
may end the driver before any cleanup runs. They run on a watcher thread woken through
``signal.set_wakeup_fd``, not in the Python handler: that handler waits until the main
thread is back in Python, and a main thread inside a Ray call to a GCS that just died
can stay in C code until SLURM's KillWait runs out and SIGKILL ends everything unrecorded.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

logger = logging.getLogger(__name__)

# SIGUSR1: `#SBATCH --signal` before the time limit; SIGTERM: scancel, preemption; SIGINT: Ctrl-C.
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)


class ShardStopped(BaseException):
    """The job was told to stop; the shard stays incomplete and is retried.

    A BaseException, like KeyboardInterrupt, so that a broad ``except Exception`` in a
    library cannot turn it into an ordinary error or hide it.
    """

    exit_code = 4


def stop_message(name: str) -> str:
    return (
        f"received {name}: stopping before finishing; no completion manifest is written and "
        "the shard is retried (curator-array retry)"
    )


class StopController:
    """The stop state of one run: who asked to stop, and what to do first when they do."""

    def __init__(self, signals: tuple[signal.Signals, ...] = STOP_SIGNALS):
        self.signals = signals
        self.requested_by: str | None = None
        self._callbacks: list[Callable[[ShardStopped], None]] = []
        self._previous: dict[int, object] = {}
        self._lock = threading.Lock()
        self._raised = False
        self._callbacks_done = threading.Event()
        self._wakeup_write_fd: int | None = None
        self._previous_wakeup_fd = -1

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    def install(self) -> StopController:
        for signum in self.signals:
            previous = signal.signal(signum, self._on_signal)
            self._previous.setdefault(signum, previous)
        self._watch()
        return self

    def uninstall(self) -> None:
        """Give the signals back to whatever handled them before ``install``."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        if self._wakeup_write_fd is not None:
            signal.set_wakeup_fd(self._previous_wakeup_fd)
            os.close(self._wakeup_write_fd)  # the watcher reads end-of-file and exits
            self._wakeup_write_fd = None

    def reclaim(self) -> None:
        """Install the handlers again if they were installed, after something replaced them.

        ``ray.init`` installs a C-level crash handler for SIGTERM that prints a stack and
        kills the driver; Python still reports our handler, so only re-installing it takes
        it back.
        """
        if self.installed:
            for signum in self.signals:
                signal.signal(signum, self._on_signal)
            self._watch()

    def _watch(self) -> None:
        """Start the watcher thread once, and (again) point Python's wakeup fd at it."""
        if self._wakeup_write_fd is None:
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)
            self._wakeup_write_fd = write_fd
            threading.Thread(target=self._read_wakeups, args=(read_fd,), name="stop-signal-watcher", daemon=True).start()
            self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        else:
            signal.set_wakeup_fd(self._wakeup_write_fd, warn_on_full_buffer=False)

    def _read_wakeups(self, read_fd: int) -> None:
        ours = {int(signum) for signum in self.signals}
        try:
            while data := os.read(read_fd, 64):
                for signum in data:
                    if signum in ours:
                        self._notice(signal.Signals(signum).name)
        finally:
            os.close(read_fd)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request(signal.Signals(signum).name)

    def _notice(self, reason: str) -> None:
        """Remember the first request and run the callbacks, once, in whichever thread comes first."""
        with self._lock:
            if self.requested_by is not None:
                return
            self.requested_by = reason
        stopped = ShardStopped(stop_message(reason))
        try:
            for callback in list(self._callbacks):
                try:
                    callback(stopped)
                except Exception:  # noqa: BLE001 - the stop itself must still happen
                    logger.exception("a stop callback failed")
        finally:
            self._callbacks_done.set()

    def request(self, reason: str) -> None:
        """Ask the run to stop (what a stop signal does); raises the first time.

        A second signal can land while this thread is still running the first one's
        callbacks (SLURM signals the step and srun forwards the same signal): it must
        neither raise into them nor wait for them to finish.
        """
        if self._raised:
            self._notice(reason)
            return
        self._raised = True
        self._notice(reason)
        # The watcher may still be recording; leaving now could cut that short.
        self._callbacks_done.wait(timeout=30)
        raise ShardStopped(stop_message(self.requested_by or reason))

    @contextmanager
    def on_stop(self, callback: Callable[[ShardStopped], None]) -> Iterator[None]:
        """Call ``callback`` as soon as a stop is requested, while inside this block."""
        self._callbacks.append(callback)
        try:
            yield
        finally:
            self._callbacks.remove(callback)

    @contextmanager
    def surfacing(self) -> Iterator[None]:
        """Let a requested stop leave this block as :class:`ShardStopped`, whatever carried it.

        A signal that lands while C code calls back into Python (a type's ``__new__``, a
        pyarrow visitor) raises inside that callback, and the C caller may report the
        exception as its own ``SystemError``; the user must still see the stop and its exit
        code, not an unexpected error.
        """
        try:
            yield
        except ShardStopped:
            raise
        except Exception as exc:
            if self.requested_by is None:
                raise
            raise ShardStopped(stop_message(self.requested_by)) from exc

    def raise_if_requested(self) -> None:
        if self.requested_by is not None:
            raise ShardStopped(stop_message(self.requested_by))

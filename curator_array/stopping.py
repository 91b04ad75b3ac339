"""Stop requests that arrive as signals: the time-limit warning, preemption, scancel.

The first signal raises :class:`ShardStopped` in the main thread, so the run unwinds
through its context managers (and the private Ray cluster is stopped on the way out). The
request is also remembered, because a signal can land inside library code that swallows
what it raises; the run loop then stops at its next check. Later signals are only
recorded, so they cannot interrupt that cleanup.

Callbacks registered with :func:`on_stop` run first, inside the handler: when SLURM
cancels a step it signals every process of it at once, so the Ray processes are dying too
and Ray may end the driver before any cleanup runs.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)

_requested_by: str | None = None
_callbacks: list[Callable[["ShardStopped"], None]] = []


class ShardStopped(BaseException):
    """The job was told to stop; the shard stays incomplete and is retried.

    A BaseException, like KeyboardInterrupt, so that a broad ``except Exception`` in a
    library cannot turn it into an ordinary error or hide it.
    """

    exit_code = 4


def _message(name: str) -> str:
    return (
        f"received {name}: stopping before finishing; no completion manifest is written and "
        "the shard is retried (curator-array retry)"
    )


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _requested_by
    first = _requested_by is None
    _requested_by = signal.Signals(signum).name
    if first:
        stopped = ShardStopped(_message(_requested_by))
        for callback in list(_callbacks):
            try:
                callback(stopped)
            except Exception:  # noqa: BLE001 - the stop itself must still happen
                logger.exception("a stop callback failed")
        raise stopped


@contextmanager
def on_stop(callback: Callable[[ShardStopped], None]) -> Iterator[None]:
    """Call ``callback`` as soon as a stop signal arrives, while inside this block."""
    _callbacks.append(callback)
    try:
        yield
    finally:
        _callbacks.remove(callback)


def install_stop_handlers() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)


def reclaim_stop_handlers() -> None:
    """Install the handlers again if they were installed, after something replaced them.

    ``ray.init`` installs a C-level crash handler for SIGTERM that prints a stack and kills
    the driver; Python still reports our handler, so only re-installing it takes it back.
    """
    if signal.getsignal(STOP_SIGNALS[0]) is _on_signal:
        install_stop_handlers()


def raise_if_stop_requested() -> None:
    if _requested_by is not None:
        raise ShardStopped(_message(_requested_by))

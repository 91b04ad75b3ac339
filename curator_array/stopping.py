"""Stop requests that arrive as signals: the time-limit warning, preemption, scancel.

The first signal raises :class:`ShardStopped` in the main thread, so the run unwinds
through its context managers (and the private Ray cluster is stopped on the way out). The
request is also remembered, because a signal can land inside library code that swallows
what it raises; the run loop then stops at its next check. Later signals are only
recorded, so they cannot interrupt that cleanup.
"""

from __future__ import annotations

import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)

_requested_by: str | None = None


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
        raise ShardStopped(_message(_requested_by))


def install_stop_handlers() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)


def raise_if_stop_requested() -> None:
    if _requested_by is not None:
        raise ShardStopped(_message(_requested_by))

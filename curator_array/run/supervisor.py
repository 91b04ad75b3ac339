"""A driver whose stop is recorded even when Ray ends it first.

When SLURM cancels or preempts an element it signals every process of the step at once.
The raylet dies with the rest, and the moment the driver next talks to it, Ray's core
worker ends the driver process on the spot (``_Exit(1)``): no Python cleanup, and on a
loaded node sometimes before the stop watcher of :mod:`.stopping` has written
``attempt_error.json``. The retry still happens (no manifest), but the user is left with
exit code 1 and no reason.

So in a SLURM job the driver runs as the child of a small parent that holds no Ray. As soon
as the child knows its attempt it tells the parent where a stop record belongs and what it
says (:func:`announce_attempt`). The parent forwards stop signals to the child, waits, and
if the child ended without a record after a stop signal, or was killed by a signal, writes
the record itself; a stopped element then always exits with :attr:`ShardStopped.exit_code`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.records.attempt import AttemptRecord
from .stopping import STOP_SIGNALS, ShardStopped, stop_message

logger = logging.getLogger(__name__)

ENV_SWITCH = "CURATOR_ARRAY_DRIVER_SUPERVISOR"
FORWARDED = STOP_SIGNALS

_channel: int | None = None  # the child's end of the pipe to its supervisor


def wanted(environ: Mapping[str, str], in_slurm: bool) -> bool:
    """On in a SLURM job unless ``CURATOR_ARRAY_DRIVER_SUPERVISOR=0``; ``=1`` forces it anywhere."""
    value = environ.get(ENV_SWITCH, "").strip()
    if value in ("0", "1"):
        return value == "1"
    return in_slurm


def announce_attempt(record_path: Path, record: AttemptRecord) -> None:
    """Tell the supervisor (if this process has one) where and what a stop record of this attempt is."""
    if _channel is None:
        return
    line = json.dumps({"path": str(record_path), "record": record.to_json()}) + "\n"
    try:
        os.write(_channel, line.encode())
    except OSError as exc:
        logger.warning("could not tell the driver's supervisor about this attempt (%s)", exc)


@dataclass(frozen=True)
class ChildEnd:
    """How the supervised driver ended: its exit code, or the signal that killed it."""

    code: int | None
    signal_name: str | None

    @classmethod
    def of(cls, status: int) -> ChildEnd:
        if os.WIFSIGNALED(status):
            return cls(None, signal.Signals(os.WTERMSIG(status)).name)
        return cls(os.WEXITSTATUS(status), None)

    @property
    def exit_code(self) -> int:
        return self.code if self.code is not None else 128 + getattr(signal, self.signal_name or "SIGKILL")


class Supervisor:
    """The parent's side: forward stop signals, wait for the driver, record what it could not."""

    def __init__(self, child: int, channel: int):
        self.child, self.channel = child, channel
        self.stop_requested_by: str | None = None

    def _forward(self, signum: int, frame) -> None:
        if self.stop_requested_by is None:
            self.stop_requested_by = signal.Signals(signum).name
        try:
            os.kill(self.child, signum)
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        """The element's exit code, once the driver ended; raises ShardStopped for a stop it recorded."""
        for signum in FORWARDED:
            signal.signal(signum, self._forward)
        _, status = os.waitpid(self.child, 0)
        end = ChildEnd.of(status)
        announced = self._announced()
        if end.code in (0, ShardStopped.exit_code) or announced is None:
            return end.exit_code
        path, record = announced
        if self.stop_requested_by is not None:
            reason = stop_message(self.stop_requested_by)
            self._record(path, record, ShardStopped.__name__, reason)
            raise ShardStopped(reason)
        if end.signal_name is not None:
            self._record(path, record, "DriverKilled", (
                f"the driver process was killed by {end.signal_name} before it could record why (the kernel's "
                "out-of-memory killer sends SIGKILL); no completion manifest is written and the shard is retried"
            ))
        return end.exit_code

    def _announced(self) -> tuple[Path, AttemptRecord] | None:
        """The driver's last announcement; read without waiting, since a process the driver forked may hold the pipe."""
        chunks = []
        os.set_blocking(self.channel, False)
        try:
            while chunk := os.read(self.channel, 65536):
                chunks.append(chunk)
        except BlockingIOError:
            pass
        os.close(self.channel)
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        if not lines:
            return None
        last = json.loads(lines[-1])
        return Path(last["path"]), AttemptRecord.from_json(last["record"])

    @staticmethod
    def _record(path: Path, record: AttemptRecord, error_type: str, error: str) -> None:
        if path.exists():  # the driver recorded it after all
            return
        try:
            replace(record, error_type=error_type, error=error, failed_tasks=()).write_at(path)
        except OSError as exc:
            logger.warning("could not record why the attempt ended (%s)", exc)
        else:
            logger.error("the driver ended before recording why; its supervisor recorded it in %s", path)


def fork_driver() -> Supervisor | None:
    """Fork: the child goes on as the driver (returns None), the parent gets its Supervisor."""
    global _channel
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent_pid = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        _channel = write_end
        _stop_when_orphaned(parent_pid)
        return None
    os.close(write_end)
    return Supervisor(child, read_end)


def _stop_when_orphaned(parent_pid: int) -> None:
    """SIGTERM (a recorded stop) if the supervisor dies first, say by a SIGKILL meant for the element."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # it died before the request
        os.kill(os.getpid(), signal.SIGTERM)

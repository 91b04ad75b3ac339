"""A deadline for the whole test session, so a hang ends as a failure that says where it hung.

pytest-timeout bounds one test, but not a worker that dies mid-test and leaves a peer
waiting, nor a teardown that blocks after the timeout has fired, nor an interpreter that
never exits. CI would then only report that it ran out of time. Past the deadline this
plugin (active in the controlling process only) prints the tests still running, the
process tree under the session and the Python stacks of every process in it (py-spy),
then ends that tree, which the session started, and exits with code 3. It keeps watching
until the process exits, so an interpreter that never finishes exiting is caught too.

A test still running a minute before pytest-timeout's limit gets the same listing and stacks,
printed by the controller: what pytest-timeout itself prints goes to a worker's captured
output, which is lost when it ends the worker.

An xdist worker that has sent all its results but does not exit (a Ray driver's threads
can keep one alive, see ray-project/ray#31145) is given ``CURATOR_ARRAY_TEST_WORKER_EXIT_S``
(default 120 s), then prints its stacks and ends: its results are already with the controller.

``CURATOR_ARRAY_TEST_DEADLINE_S`` sets the deadline (default 3600 s; 0 turns it off).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.support.processes import command_line, descendants, ended_within

DEFAULT_DEADLINE_S = 3600.0
DEFAULT_WORKER_EXIT_S = 120.0
STACKS_BEFORE_TIMEOUT_S = 60.0  # taken before pytest-timeout ends the worker (half its limit, if shorter)
EXIT_CODE = 3


def seconds_from(environ, name: str, default: float) -> float:
    value = environ.get(name, "")
    try:
        return float(value) if value else default
    except ValueError:
        raise pytest.UsageError(f"{name}={value!r} is not a number of seconds") from None


def say(text: str) -> None:
    """All of ``text`` to file descriptor 2 (a single os.write may take only part of it)."""
    data = text.encode(errors="replace")
    while data:
        data = data[os.write(2, data):]


class SessionWatchdog:
    """Watches from the controlling process, whose stderr is the run's own (a worker's is
    captured while a test runs, so what pytest-timeout prints there is lost under xdist)."""

    POLL_S = 1.0

    def __init__(self, deadline_s: float, slow_test_s: float):
        self.deadline_s, self.slow_test_s = deadline_s, slow_test_s
        self.started = time.monotonic()
        self.running: dict[str, float] = {}
        self.reported: set[str] = set()

    def start(self) -> None:
        threading.Thread(target=self._watch, name="test-session-watchdog", daemon=True).start()

    def _watch(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            now = time.monotonic()
            slow = [nodeid for nodeid, since in list(self.running.items())
                    if self.slow_test_s > 0 and now - since > self.slow_test_s and nodeid not in self.reported]
            if slow:
                self.reported.update(slow)
                say(f"\n=== {', '.join(slow)}: still running after {self.slow_test_s:.0f} s; the session's "
                    "processes and stacks ===\n")
                self.dump_processes()
            if self.deadline_s > 0 and now - self.started > self.deadline_s:
                self.report()
                self.end_session()

    def report(self) -> None:
        now = time.monotonic()
        lines = [f"\n=== the test session ran past its deadline of {self.deadline_s:.0f} s "
                 "(CURATOR_ARRAY_TEST_DEADLINE_S) ===", "tests still running:"]
        running = sorted(self.running.items())
        lines += [f"  {nodeid}  (for {now - since:.0f} s)" for nodeid, since in running] or ["  none"]
        say("\n".join(lines) + "\n")
        self.dump_processes()

    def dump_processes(self) -> None:
        pids = descendants(os.getpid())
        say("\n".join([f"processes under the session (pid {os.getpid()}):",
                       *(f"  {pid}  {command_line(pid)[:300]}" for pid in pids)]) + "\n")
        spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
        if spy is None:
            say("(py-spy is not installed: no stacks)\n")
            return
        for pid in [*pids, os.getpid()]:  # the workers first: the slow test's may be ended soon
            if "python" not in command_line(pid).split(" ", 1)[0]:
                continue
            try:
                dump = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
                say(f"--- py-spy dump {pid} ---\n{dump.stdout}{dump.stderr}")
            except (OSError, subprocess.TimeoutExpired) as exc:
                say(f"--- py-spy dump {pid}: {exc}\n")

    def end_session(self) -> None:
        """SIGKILL every process under the session, and exit once they are gone: a kill is
        delivered when the process next runs, which on a loaded host came after the exit."""
        pids = list(reversed(descendants(os.getpid())))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for pid in pids:
            ended_within(pid, max(0.0, deadline - time.monotonic()))
        os._exit(EXIT_CODE)


_watchdog: SessionWatchdog | None = None


def per_test_limit_s(config) -> float:
    """pytest-timeout's limit per test, as it reads it (its option, else the ini value); 0 for none."""
    value = config.getoption("timeout", None)
    if value is None:
        try:
            value = config.getini("timeout")
        except ValueError:  # pytest-timeout is not installed
            value = None
    return float(value or 0)


def end_if_still_exiting(worker: str, grace_s: float) -> None:
    time.sleep(grace_s)
    say(f"\n=== xdist worker {worker} did not exit {grace_s:.0f} s after its last test; its threads: ===\n")
    faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
    os._exit(0)


def pytest_configure(config) -> None:
    global _watchdog
    if hasattr(config, "workerinput"):  # an xdist worker: the controller watches
        return
    deadline = seconds_from(os.environ, "CURATOR_ARRAY_TEST_DEADLINE_S", DEFAULT_DEADLINE_S)
    limit = per_test_limit_s(config)
    _watchdog = SessionWatchdog(deadline, limit - min(STACKS_BEFORE_TIMEOUT_S, limit / 2))
    _watchdog.start()


def pytest_unconfigure(config) -> None:
    if hasattr(config, "workerinput"):
        grace = seconds_from(os.environ, "CURATOR_ARRAY_TEST_WORKER_EXIT_S", DEFAULT_WORKER_EXIT_S)
        threading.Thread(target=end_if_still_exiting, args=(config.workerinput["workerid"], grace),
                         name="worker-exit-watchdog", daemon=True).start()


def pytest_runtest_logstart(nodeid, location) -> None:
    if _watchdog is not None:
        _watchdog.running[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid, location) -> None:
    if _watchdog is not None:
        _watchdog.running.pop(nodeid, None)

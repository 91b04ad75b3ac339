"""A stop signal is recorded even while the main thread is stuck in C code."""

import json
import signal
import subprocess
import sys
import time

from tests.conftest import REPO

STUCK_IN_C = r"""
import ctypes, json, sys, time
from curator_array.run.stopping import ShardStopped, StopController

stop = StopController().install()
events = {}
with stop.on_stop(lambda stopped: events.setdefault("recorded", time.monotonic())):
    print("ready", flush=True)
    try:
        # glibc's system() waits for its child and retries on EINTR: the main thread stays
        # in C for the whole sleep, as it does in a Ray call to a GCS that just died.
        events["c_call_started"] = time.monotonic()
        ctypes.CDLL(None).system(b"sleep 3")
        while True:
            time.sleep(0.05)
    except ShardStopped as exc:
        events["raised"] = str(exc)
        events["raised_at"] = time.monotonic()
stop.uninstall()
print(json.dumps(events), flush=True)
"""


def test_stop_is_recorded_before_the_main_thread_leaves_c_code():
    child = subprocess.Popen([sys.executable, "-c", STUCK_IN_C], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=30)
    events = json.loads(out.strip().splitlines()[-1])
    assert child.returncode == 0
    # Signalled 0.5 s into a 3 s call: recorded then, not when the call returned.
    assert events["recorded"] - events["c_call_started"] < 2.0 < events["raised_at"] - events["c_call_started"], events
    assert events["raised"].startswith("received SIGTERM")


def test_the_handlers_and_wakeup_fd_are_given_back():
    from curator_array.run.stopping import StopController

    before = signal.getsignal(signal.SIGTERM)
    stop = StopController().install()
    assert signal.getsignal(signal.SIGTERM) != before
    stop.uninstall()
    assert signal.getsignal(signal.SIGTERM) == before
    assert signal.set_wakeup_fd(-1) == -1, "no wakeup fd left behind"


def test_a_stop_carried_out_by_another_error_still_leaves_as_the_stop():
    """A signal landing in a C callback can come back as SystemError; the run still stops with 4."""
    import pytest

    from curator_array.run.stopping import ShardStopped, StopController

    stop = StopController().install()
    try:
        with pytest.raises(ShardStopped) as stopped, stop.surfacing():
            try:
                signal.raise_signal(signal.SIGUSR1)
            except ShardStopped as exc:
                raise SystemError("<built-in method __new__> returned a result with an exception set") from exc
        assert stopped.value.exit_code == 4
        assert str(stopped.value).startswith("received SIGUSR1")
        assert isinstance(stopped.value.__cause__, SystemError)
        with pytest.raises(ValueError), StopController().surfacing():
            raise ValueError("an error without a stop request stays what it is")
    finally:
        stop.uninstall()


def test_a_second_signal_during_the_first_ones_callbacks_neither_raises_into_them_nor_waits():
    """SLURM signals the step and srun forwards the same signal: two arrive back to back."""
    import pytest

    from curator_array.run.stopping import ShardStopped, StopController

    events = []

    def record(stopped):
        signal.raise_signal(signal.SIGTERM)  # its handler runs here, in the main thread
        events.append(str(stopped))

    stop = StopController().install()
    try:
        with stop.on_stop(record), pytest.raises(ShardStopped) as stopped:
            stop.request("SIGUSR1")
        assert events == [str(stopped.value)] and str(stopped.value).startswith("received SIGUSR1")
    finally:
        stop.uninstall()


def test_a_stop_swallowed_while_the_cluster_starts_stops_the_run_once_it_has_started():
    """Ray's start-up code may swallow what a signal raises in it; the run must not go on to
    its tasks (the next check after a result can be minutes away)."""
    import pytest

    from curator_array.run.shard import start_cluster
    from curator_array.run.stopping import ShardStopped, StopController

    class SwallowingStart:
        started = False

        def start(self):
            try:
                signal.raise_signal(signal.SIGUSR1)
            except BaseException:  # noqa: BLE001 - as library code that swallows it
                pass
            self.started = True

    stop = StopController().install()
    try:
        client = SwallowingStart()
        with pytest.raises(ShardStopped, match="received SIGUSR1"):
            start_cluster(client, stop)
        assert client.started
        start_cluster(SwallowingStart(), None)  # library calls have no stop controller
    finally:
        stop.uninstall()

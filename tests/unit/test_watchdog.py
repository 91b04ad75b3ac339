"""The test session's guards, in a real pytest: a hung session ends with code 3 and says what hung;
a test whose worker died runs once more in a fresh worker."""

import os
import shutil
import subprocess
import sys
import time

from tests.conftest import REPO, need
from tests.support.processes import running

HUNG = """
import subprocess, time

def test_quick():
    pass

def test_hangs(tmp_path):
    child = subprocess.Popen(["sleep", "300"])
    (tmp_path.parent.parent / "child.pid").write_text(str(child.pid))
    time.sleep(300)
"""


SLOW = """
import time

def test_quick():
    pass

def test_hangs():
    time.sleep(300)
"""

NEVER_EXITS = """
import threading, time

def keep_the_process_alive():
    time.sleep(300)

def test_leaves_a_thread_behind():
    threading.Thread(target=keep_the_process_alive, name="left-behind").start()
"""


def run_session(tmp_path, deadline: str, workers: str, module: str = HUNG, worker_exit: str = "120",
                ini: str = "") -> subprocess.CompletedProcess:
    (tmp_path / "test_hung.py").write_text(module)
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}")
    env = {**os.environ, "CURATOR_ARRAY_TEST_DEADLINE_S": deadline, "CURATOR_ARRAY_TEST_WORKER_EXIT_S": worker_exit,
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.watchdog", "-n", workers,
                           "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "base"), "test_hung.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_session_past_its_deadline_names_the_hung_test_and_ends_what_it_started(tmp_path):
    start = time.monotonic()
    # The deadline counts from the session's start: on a loaded host the worker took over 4 s
    # to start, and the deadline came before the hung test had begun.
    done = run_session(tmp_path, "15", "1")
    output = done.stdout + done.stderr
    assert done.returncode == 3, output[-3000:]
    assert time.monotonic() - start < 70
    assert "ran past its deadline of 15 s" in output
    running_part = output.split("tests still running:", 1)[1].split("processes under the session", 1)[0]
    assert "test_hung.py::test_hangs" in running_part and "test_quick" not in running_part
    assert "sleep 300" in output, "the process tree is listed"
    need(shutil.which("py-spy", path=os.path.dirname(sys.executable)) is not None, "py-spy is not installed")
    assert "test_hangs (test_hung.py:" in output, "the hung worker's Python stack is printed"
    child = int((tmp_path / "base" / "child.pid").read_text())
    assert not running(child), "the session's own processes are ended"


def test_a_test_near_its_timeout_gets_its_stacks_printed_before_the_timeout_ends_its_worker(tmp_path):
    done = run_session(tmp_path, "100", "1", SLOW, ini="timeout = 8\ntimeout_method = thread\n")
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, output[-3000:]
    assert "test_hung.py::test_hangs: still running after 4 s" in output
    need(shutil.which("py-spy", path=os.path.dirname(sys.executable)) is not None, "py-spy is not installed")
    assert "test_hangs (test_hung.py:" in output, "the slow test's stack, from its worker"


def test_a_bad_deadline_is_a_usage_error(tmp_path):
    done = run_session(tmp_path, "soon", "0")
    assert done.returncode == 4 and "CURATOR_ARRAY_TEST_DEADLINE_S='soon' is not a number" in done.stderr


def test_a_worker_that_does_not_exit_after_its_last_test_is_ended_with_its_stacks(tmp_path):
    start = time.monotonic()
    done = run_session(tmp_path, "100", "1", NEVER_EXITS, worker_exit="2")
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "1 passed" in done.stdout, output[-3000:]
    assert time.monotonic() - start < 60
    assert "xdist worker gw0 did not exit 2 s after its last test" in output
    assert "keep_the_process_alive" in output, "the thread that kept it alive is named"


CRASHES = """
import os
from pathlib import Path

def test_crashes_its_worker_once(tmp_path_factory):
    mark = tmp_path_factory.getbasetemp().parent / "crashed-once"
    if not mark.exists():
        mark.write_text("")
        os._exit(1)

def test_crashes_its_worker_every_time():
    os._exit(1)

def test_after():
    pass
"""


def test_a_test_whose_worker_crashed_runs_again_once_in_a_fresh_worker(tmp_path):
    (tmp_path / "test_crashes.py").write_text(CRASHES)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.crash_rerun", "-n", "1",
                           "--dist", "loadscope", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "base"),
                           "-rA", "test_crashes.py"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert "PASSED test_crashes.py::test_crashes_its_worker_once" in out
    assert "FAILED test_crashes.py::test_crashes_its_worker_every_time" in out
    assert "PASSED test_crashes.py::test_after" in out
    listed = out.split("tests run again after their worker crashed", 1)[1]
    assert "test_crashes_its_worker_once: worker 'gw0' crashed" in listed
    assert "1 failed, 2 passed, 2 rerun" in out

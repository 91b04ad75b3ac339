"""The driver's supervisor records a stop (or a kill) its driver could not, with real processes and signals."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.support.processes import ended_within

DRIVER = r"""
import os, signal, sys, time
from pathlib import Path
from curator_array.core.layout import AttemptId
from curator_array.core.records.attempt import AttemptRecord
from curator_array.core.sharding import ShardConfig
from curator_array.run import supervisor
from curator_array.run.stopping import ShardStopped
from curator_array.slurm.jobenv import JobEnvironment

scenario, record_path = sys.argv[1], Path(sys.argv[2])
job = JobEnvironment.from_env({"SLURM_JOB_ID": "5", "SLURM_ARRAY_TASK_ID": "2"}, hostname="n1")
parent = supervisor.fork_driver()
if parent is not None:
    try:
        code = parent.wait()
    except ShardStopped as exc:
        print("stopped:", exc, flush=True)
        code = exc.exit_code
    sys.exit(code)
if scenario != "refused":
    supervisor.announce_attempt(record_path, AttemptRecord.of(job.attempt_id(), ShardConfig(2, 4), job.identity()))
if scenario == "stopped":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stands for a driver that cannot record in time
print(os.getpid(), flush=True)
if scenario == "oom":
    os.kill(os.getpid(), signal.SIGKILL)
if scenario == "recorded":
    record_path.parent.mkdir(parents=True)
    record_path.write_text('{"error": "the driver said so"}')
    sys.exit(4)
if scenario == "refused":
    sys.exit(2)
time.sleep(60)
"""


def start(scenario, tmp_path):
    path = tmp_path / "attempt" / "attempt_error.json"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, scenario, str(path)], cwd=REPO, stdout=subprocess.PIPE,
                            text=True)
    return proc, path


def test_a_stop_whose_driver_died_unrecorded_is_recorded_by_the_supervisor(tmp_path):
    """As when Ray's core worker ends the driver (``_Exit(1)``) before its own record is written."""
    parent, path = start("stopped", tmp_path)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    os.kill(child, signal.SIGKILL)  # as Ray's _Exit, with nothing recorded
    out, _ = parent.communicate(timeout=30)
    assert parent.returncode == 4
    assert out.startswith("stopped: received SIGTERM")
    record = json.loads(path.read_text())
    assert record["error_type"] == "ShardStopped" and record["error"].startswith("received SIGTERM")
    where = (record["attempt"], record["shard_index"], record["total_shards"])
    assert where == ("slurm_job_5/array_task_2/restart_0", 2, 4)
    assert record["job"]["slurm_job_id"] == "5" and record["written_at"]


def test_a_driver_killed_without_a_stop_is_recorded_as_killed(tmp_path):
    parent, path = start("oom", tmp_path)
    parent.communicate(timeout=30)
    assert parent.returncode == 128 + signal.SIGKILL
    record = json.loads(path.read_text())
    assert record["error_type"] == "DriverKilled" and "killed by SIGKILL" in record["error"]


@pytest.mark.parametrize("scenario, code", [("recorded", 4), ("refused", 2)])
def test_what_the_driver_recorded_or_refused_is_left_as_it_is(tmp_path, scenario, code):
    parent, path = start(scenario, tmp_path)
    parent.communicate(timeout=30)
    assert parent.returncode == code
    if scenario == "recorded":
        assert json.loads(path.read_text()) == {"error": "the driver said so"}
    else:
        assert not path.exists()


def test_on_in_slurm_and_switchable():
    from curator_array.run.supervisor import wanted

    assert wanted({}, in_slurm=True) and not wanted({}, in_slurm=False)
    assert wanted({"CURATOR_ARRAY_DRIVER_SUPERVISOR": "1"}, in_slurm=False)
    assert not wanted({"CURATOR_ARRAY_DRIVER_SUPERVISOR": "0"}, in_slurm=True)


def test_the_driver_is_told_to_stop_when_its_supervisor_is_killed(tmp_path):
    parent, _ = start("waits", tmp_path)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait(timeout=10)
    assert ended_within(child, 20), "the driver outlived its supervisor"

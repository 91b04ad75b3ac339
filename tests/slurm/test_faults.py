"""Faults on the real cluster: each followed by retry discovery and one resubmission, then
compared with an uninterrupted run (same files, same bytes, nothing left half-written)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from curator_array.core.task_records import count_done, parts_dir, read_parts
from curator_array.execution.ray_cluster import session_members
from tests.conftest import REPO, read_records, visible_files
from tests.slurm.conftest import (
    SLOW,
    entrypoint_line,
    job_script,
    job_states,
    sbatch,
    start_cluster,
    wait_for,
)
from tests.slurm.test_arrays import manifests, raylet_pids

pytestmark = pytest.mark.slurm
CLI_ENV = dict(os.environ, PATH=f"{REPO}/.venv/bin:{os.environ['PATH']}")


def driver_pid(array_job: str, task: str, deadline_s: float = 120) -> int:
    """The driver of node 0 of one array element (a process this test started via SLURM): the
    entrypoint process that runs Ray, a child of the one that supervises it."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                cmdline = open(f"/proc/{entry.name}/cmdline", "rb").read()
                if b"curator_array.cli.entrypoint" not in cmdline:
                    continue
                env = dict(item.split(b"=", 1) for item in open(f"/proc/{entry.name}/environ", "rb").read().split(b"\0") if b"=" in item)
            except OSError:
                continue
            if (env.get(b"SLURM_ARRAY_JOB_ID"), env.get(b"SLURM_ARRAY_TASK_ID"), env.get(b"SLURM_NODEID", b"0")) == (
                array_job.encode(), task.encode(), b"0"
            ):
                found.append(int(entry.name))
        drivers = [pid for pid in found if parent_pid(pid) in found]
        if drivers:
            return drivers[0]
        time.sleep(0.3)
    raise AssertionError(f"no driver process for {array_job}_{task}")


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def wait_for_log(log: Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return
        time.sleep(0.3)
    raise AssertionError(f"{text!r} never appeared in {log}")


def retry_and_resubmit(out: Path, script: Path, data: Path, expected_fields: str, *options: str) -> None:
    """``retry`` names what is missing; one resubmission of exactly that completes the run.

    ``options`` go to sbatch (``--nodes=1`` lets the elements of a 2-node script run side by side)."""
    fields = subprocess.run(["curator-array", "retry", "--checkpoint-path", str(out), "--format", "fields"],
                            capture_output=True, text=True, check=True, env=CLI_ENV).stdout
    assert fields == expected_fields
    array, offset, minimum, total = fields.split()
    job = sbatch(script, f"--array={array}", *options, env={"INPUT_DIR": str(data), "OUTPUT_DIR": str(out),
                                                  "SHARD_INDEX_OFFSET": offset, "MINIMUM_SHARD_INDEX": minimum,
                                                  "TOTAL_SHARDS": total, "SLOW_SECONDS": "0.2"})
    assert set(wait_for(job, len(array.split(","))).values()) == {"COMPLETED"}
    assert subprocess.run(["curator-array", "retry", "--checkpoint-path", str(out)], capture_output=True, text=True,
                          env=CLI_ENV).stdout == ""


def assert_same_as(out: Path, baseline: Path) -> None:
    assert visible_files(out) == visible_files(baseline)
    for name in visible_files(out):
        assert (out / name).read_bytes() == (baseline / name).read_bytes(), name
    records = read_records(out)
    assert len({r["id"] for r in records}) == len(records), "duplicated records"
    assert not [p for p in os.listdir(out) if ".tmp-" in p or p.endswith(".part")]


def attempt_errors(out: Path, shard: int) -> list[dict]:
    """The attempt_error.json records of one shard, one per attempt that ended early."""
    root = CheckpointLayout(out).failed_tasks_root
    return [json.loads(p.read_text()) for p in sorted(root.rglob(f"shard_{shard}/attempt_error.json"))]


def joined_worker(out: Path, task: str, timeout: float = 60) -> dict:
    """The rendezvous record of node 1 of one array element, once it joined the Ray head."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in (CheckpointLayout(out).metadata_dir / ".ray_rendezvous").glob("*/joined_1.json"):
            info = json.loads(path.read_text())
            try:
                env = open(f"/proc/{info['pid']}/environ", "rb").read()
            except OSError:
                continue
            if f"SLURM_ARRAY_TASK_ID={task}\0".encode() in env:
                return info
        time.sleep(0.3)
    raise AssertionError(f"element {task}'s worker node never joined")


def recorded_tasks(out: Path, shard: int) -> int:
    """Tasks of ``shard`` on record (finished by some attempt, so a rerun may skip them)."""
    return count_done(CheckpointLayout(out), shard)[0]


def wait_for_records(out: Path, shard: int, count: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while (found := recorded_tasks(out, shard)) < count:
        assert time.monotonic() < deadline, f"shard {shard} recorded {found} task(s), not {count}"
        time.sleep(0.2)
    return found


def test_sigkill_of_the_driver_mid_shard(slurm_cluster, sample_data_module, slow_baseline, tmp_path):
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line(SLOW)}")
    job = sbatch(script, "--array=0-1", env={"INPUT_DIR": str(sample_data_module), "OUTPUT_DIR": str(out), "SLOW_SECONDS": "2"})
    wait_for_records(out, 0, 1)
    assert raylet_pids(job), "the running element's raylet is found by its job id"
    os.kill(driver_pid(job, "0"), signal.SIGKILL)
    states = wait_for(job, 2)
    kept = recorded_tasks(out, 0)  # the workers record what they finish after the driver died
    assert states["0"] == "FAILED" and states["1"] == "COMPLETED", states
    assert sorted(manifests(out)) == [1]
    deadline = time.monotonic() + 30
    while raylet_pids(job) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not raylet_pids(job), "the killed driver's Ray cluster outlived it"
    retry_and_resubmit(out, script, sample_data_module, "0 0 0 2\n")
    assert_same_as(out, slow_baseline)
    assert manifests(out)[0]["resumed_tasks"] == kept >= 1, "the retry skipped the tasks finished before the kill"


def test_worker_node_killed_in_a_two_node_element(slurm_cluster, sample_data_module, slow_baseline, tmp_path):
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line(SLOW, '--worker-join-timeout', '90')}",
                        ("#SBATCH --nodes=2",))
    job = sbatch(script, "--array=0-1", env={"INPUT_DIR": str(sample_data_module), "OUTPUT_DIR": str(out), "SLOW_SECONDS": "4"})
    log = tmp_path / f"slurm_{job}_0.out"
    wait_for_log(log, "stage slow")
    worker = joined_worker(out, "0")
    for pid in session_members(worker["pid"]):  # the worker node's Ray processes (started by this job)
        os.kill(pid, signal.SIGKILL)
    states = wait_for(job, 2, timeout=300)
    assert states["0"] == "FAILED", (states, log.read_text()[-3000:])
    assert "died during the run" in log.read_text() or "exited before the driver finished" in log.read_text()
    assert 0 not in manifests(out)
    assert attempt_errors(out, 0), "the head did not record why the attempt ended"
    retry_and_resubmit(out, script, sample_data_module, "0 0 0 2\n" if states["1"] == "COMPLETED" else "0-1 0 0 2\n",
                       "--nodes=1")
    assert_same_as(out, slow_baseline)


@pytest.mark.parametrize("point", ["before any record", "with the last tasks running"])
def test_a_whole_two_node_element_killed_resumes_where_it_stopped(slurm_cluster, sample_data_module, slow_baseline,
                                                                  tmp_path, point):
    """SIGKILL to every process of a 2-node element (scancel --signal=KILL --full) before any
    task is on record and when all but the last two are; one resubmission completes the shard,
    running only the tasks not on record."""
    out = tmp_path / "out"
    last_file = sorted(p.name for p in sample_data_module.iterdir())[-1]  # tasks start in listing order
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line(SLOW, '--worker-join-timeout', '90')}",
                        ("#SBATCH --nodes=2",))
    job = sbatch(script, "--array=0", env={"INPUT_DIR": str(sample_data_module), "OUTPUT_DIR": str(out),
                                           "TOTAL_SHARDS": "1", "SLOW_SECONDS": "1.5", "SLOW_LAGGARD": last_file,
                                           "SLOW_LAGGARD_SECONDS": "20"})
    wait_for_log(tmp_path / f"slurm_{job}_0.out", "stage slow")
    tasks = len(list(sample_data_module.iterdir()))
    # Tasks start in listing order, spread over both nodes: the laggard (the last file) holds up
    # the task queued behind it on its node, so the last two tasks end together.
    wanted = {"before any record": 0, "with the last tasks running": tasks - 2}[point]
    if wanted:
        wait_for_records(out, 0, wanted)
    subprocess.run(["scancel", "--signal=KILL", "--full", f"{job}_0"], check=True, capture_output=True)
    kept = recorded_tasks(out, 0)
    wait_for(job, 1)
    assert 0 not in manifests(out)
    if point == "before any record":
        assert kept == 0
    retry_and_resubmit(out, script, sample_data_module, "0 0 0 1\n", "--nodes=1")
    assert_same_as(out, slow_baseline)
    assert manifests(out)[0].get("resumed_tasks", 0) == recorded_tasks_of_killed(out, kept), point


def recorded_tasks_of_killed(out: Path, kept: int) -> int:
    """What the killed attempt left on record, as the retry saw it (it may have finished one more
    task between the count and the kill)."""
    first = sorted(CheckpointLayout(out).task_records_dir(0).glob("*.jsonl"), key=lambda p: p.stat().st_mtime)[0]
    return len(read_parts(parts_dir(first), ""))


def test_worker_slurmd_stopped_in_a_two_node_element(slurm_cluster, sample_data_module, slow_baseline, tmp_path):
    """The worker node's slurmd goes away (its job processes keep running): SLURM declares the
    node failed, the head's step is told to stop, no manifest; retry converges."""
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line(SLOW, '--worker-join-timeout', '90')}",
                        ("#SBATCH --nodes=2", "#SBATCH --no-requeue"))
    job = sbatch(script, "--array=0", env={"INPUT_DIR": str(sample_data_module), "OUTPUT_DIR": str(out),
                                           "TOTAL_SHARDS": "2", "SLOW_SECONDS": "30"})
    log = tmp_path / f"slurm_{job}_0.out"
    wait_for_log(log, "stage slow")
    worker = joined_worker(out, "0")
    worker_processes = session_members(worker["pid"])
    run_dir = Path(os.environ["SLURM_CONF"]).parent.parent / "run"
    slurmd_pid = int((run_dir / f"slurmd-{worker['node_name']}.pid").read_text().split()[0])
    os.kill(slurmd_pid, signal.SIGTERM)  # the throwaway cluster's slurmd, started by this test session
    try:
        states = wait_for(job, 1, timeout=300)
        assert states["0"] == "NODE_FAIL", (states, log.read_text()[-3000:])
        assert 0 not in manifests(out)
        text = log.read_text()
        assert "NODE FAILURE" in text and "received SIGTERM: stopping before finishing" in text, text[-3000:]
        assert [e["error_type"] for e in attempt_errors(out, 0)] == ["ShardStopped"]
    finally:
        assert start_cluster("--squashfuse")["SLURM_CONF"] == os.environ["SLURM_CONF"]
    deadline = time.monotonic() + 120
    while [p for p in worker_processes if Path(f"/proc/{p}").exists()] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in worker_processes if Path(f"/proc/{p}").exists()], "the worker node's Ray processes outlived the job"
    retry_and_resubmit(out, script, sample_data_module, "0-1 0 0 2\n", "--nodes=1")
    assert_same_as(out, slow_baseline)


def wait_for_restart(element: str, timeout: float = 90) -> None:
    """Wait until SLURM has started the requeued element again (restart count 1, running).

    A requeued job waits for its old credential to expire before it may start (the throwaway
    cluster sets that to a few seconds); forcing an earlier start makes slurmd refuse the launch.
    """
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        shown = subprocess.run(["scontrol", "-o", "show", "job", element], capture_output=True, text=True).stdout
        fields = dict(item.split("=", 1) for item in shown.split() if "=" in item)
        if int(fields.get("Restarts", "0")) >= 1 and fields.get("JobState") not in ("PENDING", "COMPLETING", "REQUEUED"):
            return
        time.sleep(0.5)
    raise AssertionError(f"{element} was not started again within {timeout:.0f}s: {shown}")


def render_test_site(directory: Path, **settings) -> Path:
    """A bare-metal site for this checkout, rendered from the real templates."""
    from curator_array.run.option_table import job_script_facts
    from curator_array.slurm.sites import load_site, render_site

    settings = {"cpus_per_task": 1, **settings}
    lines = ['runtime = "baremetal"', 'partition = "debug"', f'install_dir = "{REPO}"', f'venv = "{REPO / ".venv"}"',
             *(f"{k} = {json.dumps(v)}" for k, v in settings.items())]
    toml = directory / "test-site.toml"
    toml.write_text("\n".join(lines) + "\n")
    script = directory / "test-site.sbatch"
    script.write_text(render_site(load_site(toml), REPO / "site_configs" / "templates", job_script_facts()))
    script.chmod(0o755)
    return script


def test_time_limit_with_signal_stops_gracefully(slurm_cluster, sample_data_module, tmp_path):
    out = tmp_path / "out"
    script = render_test_site(tmp_path, time="1", signal_seconds=50)
    job = sbatch(script, "--array=0", "--pipeline", "tests.slurm.slow_pipeline:build", "--num-cpus", "1",
                 "--object-store-memory", str(100 * 2**20), "--no-progress",
                 env={"INPUT_DIR": str(sample_data_module), "OUTPUT_DIR": str(out), "SLOW_SECONDS": "30",
                      "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    states = wait_for(job, 1, timeout=240)
    log = next(tmp_path.glob("curator-array_*.out")).read_text()
    assert "stop signal received" in log and "received SIGUSR1" in log, log[-3000:]
    assert states["0"] in ("FAILED", "TIMEOUT"), states
    assert not manifests(out)
    assert [e["error_type"] for e in attempt_errors(out, 0)] == ["ShardStopped"]
    assert not [p for p in os.listdir(out) if ".tmp-" in p or p.endswith(".part")]


def test_stop_signal_requeues_the_element_when_the_site_asks(slurm_cluster, sample_data_module, slow_baseline, tmp_path):
    """Preemption as sites announce it (the `--signal` warning to the batch shell) with
    ``requeue_on_signal``: the attempt stops cleanly, records why, and the requeued attempt
    (restart 1) completes the shard. The other element of the same array is requeued from
    outside (``scontrol requeue``, as an operator or a failed node does): it too completes in
    a new attempt (restart 1), without a duplicated record."""
    out = tmp_path / "out"
    script = render_test_site(tmp_path, time="10", requeue_on_signal=True)
    job = sbatch(script, "--array=0-1", "--pipeline", "tests.slurm.slow_pipeline:build", "--num-cpus", "1",
                 "--object-store-memory", str(100 * 2**20), "--no-progress",
                 env={"INPUT_DIR": str(sample_data_module), "OUTPUT_DIR": str(out), "OUTPUT_FILE_TYPE": "parquet",
                      "SLOW_SECONDS": "5", "SLOW_SECONDS_ON_RESTART": "0.2", "PYTHONPATH": str(REPO)},
                 cwd=tmp_path)
    log = tmp_path / f"curator-array_{job}_0.out"
    wait_for_records(out, 0, 1)
    subprocess.run(["scancel", "--batch", "--signal=USR1", f"{job}_0"], check=True, capture_output=True)
    wait_for_records(out, 1, 1)
    subprocess.run(["scontrol", "requeue", f"{job}_1"], check=True, capture_output=True)
    wait_for_log(log, "requeueing array task 0")
    wait_for_restart(f"{job}_0")
    wait_for_restart(f"{job}_1")
    deadline = time.monotonic() + 300
    while 0 not in manifests(out) and time.monotonic() < deadline:  # the first attempt's end is logged as FAILED
        time.sleep(0.2)
    while job_states(job).get("0") != "COMPLETED" and time.monotonic() < deadline:
        time.sleep(0.2)
    states = wait_for(job, 2)
    assert set(states.values()) == {"COMPLETED"}, (states, log.read_text()[-3000:])
    text = log.read_text()
    assert "stop signal received" in text and "received SIGUSR1: stopping before finishing" in text
    for shard in (0, 1):
        manifest = manifests(out)[shard]
        assert manifest["slurm_restart_count"] == 1 and manifest["attempt"].endswith("restart_1"), shard
        first, requeued = manifest["attempts"]
        assert first["attempt"].endswith("restart_0") and requeued["attempt"].endswith("restart_1")
        assert manifest["resumed_tasks"] == first["tasks"] >= 1, "the requeued attempt skipped what was done"
        assert first["tasks"] + requeued["tasks"] == manifest["source_tasks"]
    [stopped] = [p for p in CheckpointLayout(out).failed_tasks_root.rglob("attempt_error.json")
                 if p.parent.name == "shard_0"]
    assert stopped.parent.parent.name == "restart_0"
    assert json.loads(stopped.read_text())["error_type"] == "ShardStopped"
    assert subprocess.run(["curator-array", "retry", "--checkpoint-path", str(out)], capture_output=True, text=True,
                          env=CLI_ENV).stdout == ""
    assert_same_as(out, slow_baseline)


def test_ctrl_c_to_an_elements_process_group_is_a_stop_by_a_signal(slurm_cluster, sample_data_module, slow_baseline,
                                                                   tmp_path):
    """SIGINT to the element's foreground process group, as a terminal's Ctrl-C sends it: exit 4,
    the stop recorded with its signal, and one retry ends as an uninterrupted run."""
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line(SLOW)}")
    data = {"INPUT_DIR": str(sample_data_module), "OUTPUT_DIR": str(out)}
    job = sbatch(script, "--array=0-1", env={**data, "SLOW_SECONDS": "2", "SLOW_ONLY_ARRAY_TASK": "0"})
    wait_for_records(out, 0, 1)
    os.killpg(os.getpgid(parent_pid(driver_pid(job, "0"))), signal.SIGINT)
    states = wait_for(job, 2)
    assert states["0"] == "FAILED" and states["1"] == "COMPLETED", states
    assert [int(re.search(r"(?<![A-Za-z])ExitCode=(\d+)", line).group(1)) for line in  # not DerivedExitCode
            (Path(os.environ["SLURM_CONF"]).parent.parent / "log" / "jobcomp.txt").read_text().splitlines()
            if f"ArrayJobId={job} " in line and "ArrayTaskId=0 " in line] == [4]
    [record] = attempt_errors(out, 0)
    assert record["error_type"] == "ShardStopped" and "received SIGINT: stopping before finishing" in record["error"]
    retry_and_resubmit(out, script, sample_data_module, "0 0 0 2\n")
    assert_same_as(out, slow_baseline)

"""Bad inputs and overlapping attempts: one clear message, nothing lost, nothing duplicated."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from curator_array.core.layout import CheckpointLayout
from tests.conftest import REPO, need, ray_errors, read_records, records_digest, visible_files

pytestmark = pytest.mark.ray
CLI = [sys.executable, "-m", "curator_array.cli"]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def run_cli(*args, env_extra=None, prefix=()):
    env = dict(os.environ, **(env_extra or {}))
    done = subprocess.run([*prefix, *CLI, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    if done.returncode == 0:
        assert not ray_errors(done.stderr), f"Ray printed error-level lines in a run that succeeded: {ray_errors(done.stderr)}"
    return done


def obeying_file_modes() -> list[str]:
    """A command prefix under which ``chmod 000`` makes a file unreadable, even for root.

    Root reads anything through CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH; without them (dropped
    from the bounding and inheritable sets, so Ray's processes lack them too) file modes apply.
    """
    if os.geteuid() != 0:
        return []
    need(shutil.which("setpriv") is not None, "setpriv (util-linux) is needed to drop root's file-read override")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


def shard_env(index: int, total: int) -> dict[str, str]:
    return {"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": str(index), "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": str(total)}


def test_an_input_dir_without_input_files_is_refused_and_nothing_is_written(tmp_path):
    """No silent success: an empty input dir, or a dir of another format, is exit 2 with one
    line naming the directory and the type, before any record is written (also in an array
    element, which would otherwise "complete" with nothing done)."""
    empty, jsonl = tmp_path / "empty", tmp_path / "jsonl"
    empty.mkdir()
    jsonl.mkdir()
    (jsonl / "a.jsonl").write_text('{"text": "one two three four five six"}\n')
    cases = [(empty, [], {}, "the directory is empty"), (empty, [], shard_env(1, 2), "the directory is empty"),
             (jsonl, ["--input-file-type", "warc"], {}, "it holds 1 other file(s), e.g. a.jsonl")]
    for index, (directory, extra, env, why) in enumerate(cases):
        out = tmp_path / f"out{index}"
        result = run_cli("run", "--input-dir", str(directory), "--output-dir", str(out), *SMALL, *extra,
                         env_extra=env)
        assert result.returncode == 2, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert str(directory) in last and why in last, last
        assert ("warc input files" if extra else "jsonl input files") in last
        assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))


def test_missing_input_dir_is_a_configuration_error(tmp_path):
    result = run_cli("run", "--input-dir", str(tmp_path / "nope"), "--output-dir", str(tmp_path / "out"), *SMALL)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith("does not exist or is not a directory")


def test_full_disk_while_writing_leaves_no_manifest_and_no_partial_output(sample_jsonl, tmp_path):
    need(os.geteuid() == 0 and shutil.which("mount") is not None, "mounting a small tmpfs needs root")
    small = tmp_path / "small-disk"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(small)], capture_output=True, text=True)
    need(mounted.returncode == 0, f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        checkpoint = tmp_path / "ckpt"
        result = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(small), "--checkpoint-path",
                         str(checkpoint), *SMALL)
        assert result.returncode == 3, result.stderr[-2000:]
        assert "No space left on device" in result.stderr
        assert not list(CheckpointLayout(checkpoint).completion_dir.glob("completed_*.json"))
        assert not [p for p in os.listdir(small) if ".tmp-" in p], "a temporary file was left behind"
        for name in visible_files(small):  # whatever made it is complete
            assert (small / name).read_text().endswith("\n")
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_two_attempts_of_one_shard_at_once_give_one_manifest_and_correct_outputs(sample_jsonl, tmp_path):
    baseline = tmp_path / "baseline"
    assert run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(baseline), *SMALL,
                   env_extra=shard_env(1, 2)).returncode == 0
    out = tmp_path / "out"
    env = dict(os.environ, **shard_env(1, 2))
    args = [*CLI, "run", "--input-dir", str(sample_jsonl), "--output-dir", str(out), *SMALL]
    procs = [subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    manifests = list(CheckpointLayout(out).completion_dir.glob("completed_*.json"))
    assert [m.name for m in manifests] == ["completed_slurm_array_1.json"]
    assert visible_files(out) == visible_files(baseline)
    assert records_digest(read_records(out)) == records_digest(read_records(baseline))
    for name in visible_files(out):
        assert (out / name).read_bytes() == (baseline / name).read_bytes()


def test_read_only_checkpoint_path_is_a_clear_configuration_error(sample_jsonl, tmp_path):
    need(os.geteuid() == 0 and shutil.which("mount") is not None, "a read-only bind mount needs root")
    writable, read_only = tmp_path / "ckpt-rw", tmp_path / "ckpt-ro"
    writable.mkdir()
    read_only.mkdir()
    bound = subprocess.run(["mount", "--bind", str(writable), str(read_only)], capture_output=True, text=True)
    need(bound.returncode == 0, f"cannot bind-mount here: {bound.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(read_only)], check=True, capture_output=True)
        result = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(tmp_path / "out"),
                         "--checkpoint-path", str(read_only), *SMALL)
        assert result.returncode == 2
        assert "is not writable (Read-only file system)" in result.stderr.strip().splitlines()[-1]
        assert not (tmp_path / "out").exists() or not visible_files(tmp_path / "out"), "nothing ran"
    finally:
        subprocess.run(["umount", str(read_only)], check=False)


def test_unreadable_input_file_fails_its_task_by_name_and_the_rerun_completes(sample_jsonl, tmp_path):
    prefix = obeying_file_modes()
    baseline = tmp_path / "baseline"
    assert run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(baseline), *SMALL).returncode == 0
    victim = sorted(sample_jsonl.glob("*.jsonl"))[3]
    victim.chmod(0)
    out = tmp_path / "out"
    result = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(out), *SMALL, prefix=prefix)
    assert result.returncode == 3, result.stderr[-2000:]
    assert f"Failed to open local file '{victim}'" in result.stderr and "Permission denied" in result.stderr
    layout = CheckpointLayout(out)
    assert not list(layout.completion_dir.glob("completed_*.json"))
    [record] = list(layout.failed_tasks_root.rglob("failed_tasks.json"))
    [failure] = json.loads(record.read_text())["failed_tasks"]
    assert str(victim) in failure["reason"] and failure["stage"] == "jsonl_reader"
    done = visible_files(out)
    assert len(done) == len(visible_files(baseline)) - 1, "every other task finished"
    for name in done:
        assert (out / name).read_bytes() == (baseline / name).read_bytes(), name

    victim.chmod(0o644)
    rerun = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(out), *SMALL, prefix=prefix)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert visible_files(out) == visible_files(baseline)
    for name in visible_files(out):
        assert (out / name).read_bytes() == (baseline / name).read_bytes(), name


@pytest.mark.parametrize("moment, waypoint, slow", [
    ("mid-shard", "stage slow", {}),
    # SLURM may send the time-limit signal up to a minute early: before the shard even runs.
    ("while preparing", "building the slow pipeline", {"SLOW_BUILD_SECONDS": "60"}),
])
def test_stop_signal_ends_the_attempt_with_a_recorded_reason_and_no_manifest(sample_jsonl, tmp_path, moment,
                                                                             waypoint, slow):
    """The entrypoint outside SLURM: SIGUSR1 (what `#SBATCH --signal` forwards)."""
    out, log = tmp_path / "out", tmp_path / "stderr.txt"
    args = [sys.executable, "-m", "curator_array.cli.entrypoint", "--input-dir", str(sample_jsonl), "--output-dir",
            str(out), "--pipeline", "tests.slurm.slow_pipeline:build", *SMALL]
    env = dict(os.environ, SLOW_SECONDS="30", PYTHONPATH=str(REPO), **slow)
    with log.open("w") as stderr:
        proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 120
            while waypoint not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            proc.send_signal(signal.SIGUSR1)
            assert proc.wait(timeout=60) == 4, log.read_text()[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert "received SIGUSR1: stopping before finishing" in text.strip().splitlines()[-1]
    layout = CheckpointLayout(out)
    assert not list(layout.completion_dir.glob("completed_*.json"))
    [record] = list(layout.failed_tasks_root.rglob("attempt_error.json"))
    payload = json.loads(record.read_text())
    assert payload["error_type"] == "ShardStopped" and "SIGUSR1" in payload["error"]
    assert not [p for p in os.listdir(out) if ".tmp-" in p]
    status = subprocess.run([*CLI, "status", "--checkpoint-path", str(out)], capture_output=True, text=True, cwd=REPO)
    if moment == "mid-shard":
        assert "shard 0: ended early: received SIGUSR1" in status.stdout, status.stdout
    else:
        assert status.returncode != 0 and "1 attempt(s) ended before the run was recorded" in status.stderr, status


def test_ctrl_c_is_a_stop_by_a_signal_and_the_rerun_resumes(sample_jsonl, tmp_path):
    """What a terminal's Ctrl-C does: SIGINT to the whole foreground process group."""
    out, log = tmp_path / "out", tmp_path / "stderr.txt"
    args = [*CLI, "run", "--input-dir", str(sample_jsonl), "--output-dir", str(out), "--pipeline",
            "tests.slurm.slow_pipeline:build", "--output-file-type", "parquet", *SMALL]
    env = dict(os.environ, SLOW_SECONDS="1", PYTHONPATH=str(REPO))
    with log.open("w") as stderr:
        proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True)  # its own group, as a shell gives a foreground job
        try:
            deadline = time.monotonic() + 120
            while "rows written" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=60) == 4, log.read_text()[-2000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    last = log.read_text().strip().splitlines()[-1]
    assert last == ("curator-array: error: received SIGINT: stopping before finishing; no completion manifest is "
                    "written and the shard is retried (curator-array retry)"), last
    [record] = CheckpointLayout(out).failed_tasks_root.rglob("attempt_error.json")
    assert "SIGINT" in json.loads(record.read_text())["error"]
    [stopped] = [line for line in log.read_text().splitlines() if "tasks of shard 0 on record" in line]
    recorded = int(stopped.split("stopped: ")[1].split("/")[0])
    assert 1 <= recorded < 12 and stopped.endswith(f"a rerun runs only the other {12 - recorded}"), stopped
    status = run_cli("status", "--checkpoint-path", str(out))
    assert "unfinished   shard 0\n" in status.stdout, status.stdout
    assert f"done so far  {recorded} tasks (0 in complete shards, {recorded} on record in unfinished ones)" in \
        status.stdout, status.stdout
    assert json.loads(run_cli("status", "--checkpoint-path", str(out), "--json").stdout)["tasks_done"] == recorded
    baseline = tmp_path / "baseline"
    done = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(baseline), "--pipeline",
                   "tests.slurm.slow_pipeline:build", "--output-file-type", "parquet", *SMALL,
                   env_extra={"SLOW_SECONDS": "0", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    rerun = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(out), "--pipeline",
                    "tests.slurm.slow_pipeline:build", "--output-file-type", "parquet", *SMALL,
                    env_extra={"SLOW_SECONDS": "0", "PYTHONPATH": str(REPO)})
    assert rerun.returncode == 0 and "shard 0 resumes: " in rerun.stderr, rerun.stderr[-2000:]
    assert visible_files(out) == visible_files(baseline)
    assert all((out / name).read_bytes() == (baseline / name).read_bytes() for name in visible_files(out))

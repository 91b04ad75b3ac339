"""A shard resumes where it stopped: tasks finished before a crash are not run again, unless
their outputs are no longer what was recorded; the result equals an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from curator_array.core.records.shard import CompletionManifest
from tests.conftest import REPO, read_records
from tests.integration.test_reliability import CLI, SMALL
from tests.support.processes import command_line, descendants

pytestmark = pytest.mark.ray
SLOW = ["--pipeline", "tests.slurm.slow_pipeline:build", "--output-file-type", "parquet"]


def run(input_dir: Path, out: Path, seconds: float, *extra: str, wait: bool = True):
    env = dict(os.environ, SLOW_SECONDS=str(seconds))
    args = [*CLI, "run", "--input-dir", str(input_dir), "--output-dir", str(out), *SMALL, *SLOW, *extra]
    if wait:
        return subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)


def recorded(out: Path) -> list[str]:
    """Task ids on record for shard 0 (what a rerun may skip); each task here is one part."""
    ids = []
    for path in CheckpointLayout(out).task_records_dir(0).glob("*.parts/*.jsonl"):
        ids += [json.loads(line)["t"] for line in path.read_text().splitlines() if line.endswith("}")]
    return ids


def wait_until_recorded(out: Path, count: int, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(recorded(out)) < count:
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "tasks were not recorded as they finished"
        time.sleep(0.1)


def outputs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if not p.name.startswith(".")}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The same pipeline, uninterrupted."""
    from tests.conftest import SAMPLE

    out = tmp_path_factory.mktemp("baseline") / "out"
    done = run(SAMPLE / "jsonl", out, 0.0)
    assert done.returncode == 0, done.stderr
    return outputs(out)


def manifest(out: Path) -> CompletionManifest:
    return CompletionManifest.read(CheckpointLayout(out).manifest_path(0))


def settled_outputs(out: Path, quiet_s: float) -> set[str]:
    """The outputs in place once none appeared for ``quiet_s`` seconds."""
    names, since = set(outputs(out)), time.monotonic()
    while time.monotonic() - since < quiet_s:
        time.sleep(0.1)
        now = set(outputs(out))
        if now != names:
            names, since = now, time.monotonic()
    return names


def kill_driver_after(sample_jsonl: Path, out: Path, delay: float, tasks: int) -> None:
    """Start a shard whose tasks take ``delay`` s each; once ``tasks`` are recorded, freeze its
    driver (SIGSTOP) while the workers finish what they hold, then SIGKILL it.

    Every output then in place must be on record: the workers record what they write, so
    a driver that falls behind (or dies) loses no finished task."""
    driver = run(sample_jsonl, out, delay, wait=False)
    wait_until_recorded(out, tasks, driver)
    os.kill(driver.pid, signal.SIGSTOP)
    in_place = {name.removesuffix(".parquet") for name in settled_outputs(out, 4 * delay + 1)}
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    assert in_place == set(recorded(out)), "an output in place is not on record"


def test_a_killed_driver_resumes_and_distrusts_changed_outputs(sample_jsonl, tmp_path, baseline):
    out = tmp_path / "out"
    kill_driver_after(sample_jsonl, out, 0.7, 6)
    done_before = recorded(out)
    assert 6 <= len(done_before) < 12 and not CheckpointLayout(out).manifest_path(0).exists()
    cut, changed, gone = (f"{task}.parquet" for task in done_before[:3])
    (out / cut).write_bytes((out / cut).read_bytes()[:100])
    data = bytearray((out / changed).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (out / changed).write_bytes(bytes(data))
    (out / gone).unlink()

    again = run(sample_jsonl, out, 0.0)
    assert again.returncode == 0, again.stderr
    assert f"runs again: {cut} has 100 bytes" in again.stderr
    assert f"runs again: {changed} changed since it was written (checksum)" in again.stderr
    assert f"runs again: {gone} is missing" in again.stderr
    kept = len(done_before) - 3
    assert f"resumes: {kept} of 12 task(s) finished in earlier attempts" in again.stderr
    assert outputs(out) == baseline, "the resumed shard's outputs equal an uninterrupted run's"
    final = manifest(out)
    assert final.work.source_tasks == 12 and final.resumed_tasks == kept
    assert len(set(final.work.source_task_ids)) == 12 and len(final.attempts) == 2
    assert sum(a.tasks for a in final.attempts) == 12
    records = read_records(out)
    assert len({r["id"] for r in records}) == len(records) == final.work.rows_out


def test_force_runs_every_task_again(sample_jsonl, tmp_path, baseline):
    out = tmp_path / "out"
    kill_driver_after(sample_jsonl, out, 0.5, 3)
    forced = run(sample_jsonl, out, 0.0, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "resumes" not in forced.stderr and manifest(out).resumed_tasks == 0
    assert outputs(out) == baseline


def test_a_killed_ray_worker_loses_no_task_and_duplicates_none(sample_jsonl, tmp_path, baseline):
    out = tmp_path / "out"
    driver = run(sample_jsonl, out, 0.7, wait=False)
    wait_until_recorded(out, 2, driver)
    busy = [p for p in descendants(driver.pid) if "ray::" in command_line(p) and "IDLE" not in command_line(p)]
    assert busy, "a Ray worker running a task"
    os.kill(busy[0], signal.SIGKILL)
    driver.wait(timeout=300)
    if driver.returncode != 0:  # Ray may not retry the task; the shard then resumes
        again = run(sample_jsonl, out, 0.0)
        assert again.returncode == 0, again.stderr
    assert outputs(out) == baseline
    final = manifest(out)
    records = read_records(out)
    assert len({r["id"] for r in records}) == len(records) == final.work.rows_out

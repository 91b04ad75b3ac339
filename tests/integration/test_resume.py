"""A shard resumes where it stopped: tasks finished before a crash are not run again, unless
their outputs are no longer what was recorded; the result equals an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import shutil
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


def streamed_run(warcs: Path, out: Path, seconds: float, *extra: str, wait: bool = True):
    return run(warcs, out, seconds, "--input-file-type", "warc", "--records-per-batch", "4", *extra, wait=wait)


def finished_tasks(out: Path) -> set[str]:
    """Tasks whose last part is on record (the parts before it are recorded before it)."""
    return {json.loads(line)["t"] for path in CheckpointLayout(out).task_records_dir(0).glob("*.parts/*.jsonl")
            for line in path.read_text().splitlines() if line.endswith("}") and json.loads(line)["z"]}


def tasks_with_files_on_record(out: Path) -> set[str]:
    """Tasks with a file in place and on record (a file is renamed first, then recorded)."""
    return {json.loads(line)["t"] for path in CheckpointLayout(out).task_records_dir(0).glob("*.parts/*.jsonl")
            for line in path.read_text().splitlines() if line.endswith("}") and json.loads(line)["f"]}


def rows_by_task(out: Path) -> dict[str, list]:
    """Each task's documents in file order (files named ``<task>.<first part>.parquet``)."""
    import pyarrow.parquet as pq

    rows: dict[str, list] = {}
    for name in sorted(outputs(out)):
        rows.setdefault(name.split(".")[0], []).extend(pq.read_table(out / name).column("id").to_pylist())
    return rows


def test_a_streamed_task_is_one_file_and_a_kill_mid_file_redoes_that_task_alone(tmp_path):
    """A WARC's parts are row groups of one file. Killed mid-file (the whole process tree, as a
    lost node), the run leaves no file under a final name that is not on record; the rerun redoes
    the unfinished tasks alone, removing the files their earlier attempt had put in place (here
    it cuts them otherwise: the file size is not pinned), and ends with every document once and
    no partial file left."""
    import pyarrow.parquet as pq

    from tests.support.warcs import Page, write_warc

    warcs = tmp_path / "warcs"
    warcs.mkdir()
    rng = random.Random(4)  # pages that do not compress away: a part is about 340 KB on disk
    for index in range(4):
        write_warc(warcs / f"w{index}.warc.gz",
                   [Page(f"https://example.com/{index}/{i}", f"<p>{rng.randbytes(85_000).hex()}</p>".encode())
                    for i in range(24)])
    whole = tmp_path / "whole"
    done = streamed_run(warcs, whole, 0.0)
    assert done.returncode == 0, done.stderr
    assert len(outputs(whole)) == 4 and all(name.endswith(".00000.parquet") for name in outputs(whole))
    assert {pq.ParquetFile(whole / name).num_row_groups for name in outputs(whole)} == {6}
    expected = rows_by_task(whole)

    out = tmp_path / "out"
    driver = streamed_run(warcs, out, 0.4, "--output-file-size", "1MiB", wait=False)  # 2 or 3 parts a file
    deadline = time.monotonic() + 120
    while not (finished_tasks(out) and tasks_with_files_on_record(out) - finished_tasks(out)):
        assert driver.poll() is None and time.monotonic() < deadline, "a second task's first file was not recorded"
        time.sleep(0.05)
    for pid in [*descendants(driver.pid), driver.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    driver.wait()
    finished = finished_tasks(out)
    in_place = {name.split(".")[0] for name in outputs(out)}
    assert in_place - finished, "a task had put a file in place before it was finished"
    assert any(p.name.startswith(".") and ".tmp-" in p.name for p in out.iterdir()), "the kill came mid-file"
    # As if the kill had also fallen between a file's rename and its record line: in place, on no record.
    unfinished = sorted(in_place - finished)[0]
    unrecorded = f"{unfinished}.00005.parquet"
    shutil.copy(out / next(name for name in sorted(outputs(out)) if name.startswith(f"{unfinished}.")), out / unrecorded)

    again = streamed_run(warcs, out, 0.0)
    assert again.returncode == 0, again.stderr
    kept = len(finished)
    assert f"resumes: {kept} of 4 task(s) finished in earlier attempts" in again.stderr
    assert "earlier attempt's" in again.stderr and " removed" in again.stderr
    assert rows_by_task(out) == expected, "every document once, in order, in each task's files"
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name], "the killed writer's partial file is gone"
    assert "partial file(s) that killed writers left removed" in again.stderr
    assert f"{unrecorded} was put in place by a killed attempt and never recorded" in again.stderr
    assert sorted(outputs(out)) == sorted(Path(f).name for f in manifest(out).work.output_files)

"""A grown input tree: a run outside an array says what was added since its listing was
frozen, and ``--relist`` adds it to the run, running only the new tasks; nothing succeeds
silently and no finished task runs again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import curator_here as curator
from tests.conftest import read_records

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def write(directory: Path, name: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{name}.jsonl").write_text("".join(
        json.dumps({"id": f"{name}{i}", "text": f"words of document {name} {i}"}) + "\n" for i in range(3)))


def run(inputs: Path, out: Path, *extra: str):
    return curator("run", "--input-dir", str(inputs), "--output-dir", str(out), *SMALL, *extra, check=False)


def test_files_added_after_a_complete_run_are_named_then_added_by_relist(tmp_path):
    inputs, out = tmp_path / "in", tmp_path / "out"
    for name in "ab":
        write(inputs, name)
    assert run(inputs, out).returncode == 0
    finished = {p.name: p.stat().st_mtime_ns for p in out.glob("*.jsonl")}
    write(inputs, "c")
    again = run(inputs, out)
    assert again.returncode == 0
    assert f"1 file(s) added (e.g. c.jsonl) under {inputs} since the run froze its listing" in again.stderr
    assert "--relist adds the new files to it" in again.stderr and "already complete" in again.stderr
    grown = run(inputs, out, "--relist")
    assert grown.returncode == 0, grown.stderr[-3000:]
    assert "--relist: 1 file(s) added to the run (1 new task(s))" in grown.stderr
    assert "resumes: 2 of 3 task(s) finished in earlier attempts" in grown.stderr
    assert {n: m for n, m in ((p.name, p.stat().st_mtime_ns) for p in out.glob("*.jsonl")) if n in finished} == \
        finished, "the finished tasks did not run again"
    assert sorted(r["id"] for r in read_records(out)) == sorted(f"{n}{i}" for n in "abc" for i in range(3))
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    assert status["source_task_count"] == 3 and status["totals"]["rows_out"] == 9
    [relisted] = status["amendments"]
    assert (relisted["kind"], relisted["added_files"], relisted["rerun_shards"]) == ("relist", 1, "0")
    shown = curator("status", "--checkpoint-path", str(out)).stdout
    assert "--relist added 1 input file(s) to the run; complete shard(s) that ran again for them: 0" in shown, shown
    (inputs / "a.jsonl").unlink()
    refused = run(inputs, out, "--relist")
    assert refused.returncode == 2 and "1 removed (e.g. a.jsonl)" in refused.stderr


def test_a_run_with_later_phases_does_not_grow(tmp_path):
    inputs, out = tmp_path / "in", tmp_path / "out"
    for name in "ab":
        write(inputs, name)
    assert run(inputs, out, "--dedup", "exact").returncode == 0
    write(inputs, "c")
    refused = run(inputs, out, "--dedup", "exact", "--relist")
    assert refused.returncode == 2 and "later phases" in refused.stderr and "--new-run" in refused.stderr


def test_an_element_of_many_shards_named_by_the_variables_never_walks_the_input(tmp_path):
    """A later element of a multi-shard run started by the reference system's variables (no SLURM):
    at most a handful of directory reads under the input root, counted with strace."""
    import os
    import shutil
    import subprocess
    import sys

    from tests.conftest import need

    if not shutil.which("strace") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-qq", "strace"], capture_output=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    need(shutil.which("strace") is not None, "strace is not installed (apt-get install strace)")
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    for directory in range(20):
        for name in range(5):
            write(inputs / f"d{directory:02d}", f"f{directory}-{name}")
    shard = {"NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "4"}
    curator("run", "--input-dir", str(inputs), "--output-dir", str(out), *SMALL,
            env={**shard, "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "0"})
    trace = tmp_path / "strace.log"
    done = subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=getdents64", "-o", str(trace), sys.executable,
                           "-m", "curator_array.cli", "run", "--input-dir", str(inputs), "--output-dir", str(out),
                           *SMALL], env={**os.environ, **shard, "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "1"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    reads = [line for line in trace.read_text().splitlines() if f"<{inputs}" in line]
    assert len(reads) <= 10, f"{len(reads)} directory reads under the input root:\n" + "\n".join(reads[:20])
    assert run(inputs, tmp_path / "one").returncode == 0
    write(inputs / "d00", "late")
    again = run(inputs, tmp_path / "one")
    assert "1 file(s) added" in again.stderr, "a single-shard run still compares the tree"

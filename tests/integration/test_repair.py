"""The README's "When things go wrong" row for a bad input file, followed word for word on a
run outside an array: a task fails on a malformed record; the file is fixed (or the reader
told to skip such records) and the same command runs again with ``--repair``. Only the
unfinished task runs, every finished one is kept, and the repair is on record."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import curator_here as curator
from tests.conftest import read_records

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
GOOD = [{"id": f"{name}{i}", "text": f"document {name} {i} has enough words to keep"} for name in "abc" for i in range(3)]


@pytest.fixture
def inputs(tmp_path) -> Path:
    directory = tmp_path / "in"
    directory.mkdir()
    for name in "abc":
        lines = [json.dumps(r) for r in GOOD if r["id"].startswith(name)]
        if name == "b":
            lines.insert(1, '{"id": "b-bad", "text": oops')
        (directory / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return directory


def run(inputs: Path, out: Path, *extra: str, check: bool = False):
    return curator("run", "--input-dir", str(inputs), "--output-dir", str(out), *SMALL, *extra, check=check)


def test_a_fixed_file_is_repaired_and_the_finished_tasks_are_kept(inputs, tmp_path):
    out = tmp_path / "out"
    failed = run(inputs, out)
    assert failed.returncode == 3 and "b.jsonl: line 2: malformed JSON record" in failed.stderr
    assert "Fix the file and run the same command again with --repair" in failed.stderr, "the first hint names it"
    kept = {path.name: path.stat().st_mtime_ns for path in out.glob("*.jsonl")}
    assert len(kept) == 2, "a and c finished"

    fixed = inputs / "b.jsonl"
    fixed.write_text("\n".join(json.dumps(r) for r in GOOD if r["id"].startswith("b")) + "\n")
    refused = run(inputs, out)
    assert refused.returncode == 2 and "--repair accepts them: their tasks have not finished" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, f"the reason, and only that:\n{refused.stderr}"

    repaired = run(inputs, out, "--repair")
    assert repaired.returncode == 0, repaired.stderr[-3000:]
    assert "resumes: 2 of 3 task(s) finished in earlier attempts" in repaired.stderr
    assert {path.name: path.stat().st_mtime_ns for path in out.glob("*.jsonl") if path.name in kept} == kept, \
        "the finished tasks' outputs are untouched"
    assert sorted(r["id"] for r in read_records(out)) == sorted(r["id"] for r in GOOD)
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    [amendment] = status["amendments"]
    assert amendment["kind"] == "input" and list(amendment["files"]) == [str(fixed)]
    assert "input of 1 unfinished task(s) of shard 0 changed (b.jsonl)" in curator(
        "status", "--checkpoint-path", str(out)).stdout


def test_malformed_records_are_skipped_for_the_unfinished_tasks_by_a_repair(inputs, tmp_path):
    out = tmp_path / "out"
    assert run(inputs, out).returncode == 3
    refused = run(inputs, out, "--malformed", "skip")
    assert refused.returncode == 2 and "--repair changes it for the tasks that have not finished" in refused.stderr
    repaired = run(inputs, out, "--repair", "--malformed", "skip")
    assert repaired.returncode == 0, repaired.stderr[-3000:]
    assert "1 malformed lines skipped" in repaired.stderr
    assert sorted(r["id"] for r in read_records(out)) == sorted(r["id"] for r in GOOD)
    text = curator("status", "--checkpoint-path", str(out)).stdout
    assert "malformed records fail → skip for the unfinished tasks" in text and "Input records skipped (--malformed skip), by kind: malformed_lines 1" in text
    again = run(inputs, out, "--malformed", "skip")
    assert again.returncode == 0 and "already complete" in again.stderr, "the amended run is the run from now on"


def test_a_finished_tasks_input_and_the_filters_cannot_change_by_repair(inputs, tmp_path):
    out = tmp_path / "out"
    assert run(inputs, out).returncode == 3
    finished = inputs / "a.jsonl"
    finished.write_text(finished.read_text() + json.dumps({"id": "a9", "text": "one more"}) + "\n")
    os.utime(finished)
    refused = run(inputs, out, "--repair")
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "--repair mends only tasks that have not finished" in refused.stderr and "a.jsonl" in refused.stderr
    other_filter = run(inputs, out, "--repair", "--min-words", "3")
    assert other_filter.returncode == 2 and "another pipeline" in other_filter.stderr, other_filter.stderr
    assert not (out / ".nemo_curator_metadata" / ".slurm_array_completion" / "amendments").exists()

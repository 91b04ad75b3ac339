"""Rendered site scripts on the real throwaway cluster; the `local` site end to end."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from curator_array.slurm.sites import site_names
from tests.conftest import REPO, SAMPLE, read_records, records_digest
from tests.slurm.conftest import job_states, wait_for

pytestmark = [pytest.mark.slurm]
SITES = REPO / "site_configs"
CLI = [str(REPO / ".venv" / "bin" / "curator-array")]


@pytest.mark.parametrize("name", site_names(SITES))
def test_sbatch_test_only_accepts_every_rendered_script(slurm_cluster, name, tmp_path):
    # This cluster has one small partition: override what only exists on the example clusters.
    overrides = ["--partition=debug", "--cpus-per-task=1", "--mem=100M", "--array=0-3", "--account=", "--qos="]
    result = subprocess.run(["sbatch", "--test-only", *overrides, str(SITES / f"{name}.sbatch")], capture_output=True,
                            text=True, cwd=tmp_path, env=dict(os.environ, INPUT_DIR="/x", OUTPUT_DIR="/y"))
    assert result.returncode == 0 and "to start at" in result.stderr, result.stderr


def cli(*args, env, cwd, check=True):
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, env=env)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def read_jsonl_inputs(directory: Path) -> list[dict]:
    records = [json.loads(line) for p in sorted(directory.glob("*.jsonl")) for line in p.read_text().splitlines()]
    for path in sorted(directory.glob("*.jsonl.gz")):
        records += [json.loads(line) for line in gzip.open(path, "rt").read().splitlines()]
    return records


@pytest.mark.container
def test_local_site_submit_windows_cancel_and_retry_submit(slurm_cluster, sqsh, tmp_path):
    data = tmp_path / "in"  # under /tmp, which ch-run shares with the host
    shutil.copytree(SAMPLE / "jsonl", data)
    out = tmp_path / "out"
    env = dict(os.environ, INPUT_DIR=str(data), OUTPUT_DIR=str(out), CONTAINER_IMAGE=str(sqsh))
    common = ["--site", "local", "--sites-dir", str(SITES)]
    script = SITES / "local.sbatch"

    dry = cli("submit", *common, "--total-shards", "6", "--dry-run", env=env, cwd=tmp_path)
    paths = f"CHECKPOINT_PATH={out} INPUT_DIR={data} OUTPUT_DIR={out}"
    request = re.search(r"--request (\w+)$", dry.stdout.splitlines()[0]).group(1)
    assert dry.stdout.splitlines() == [  # MaxArraySize=5 on this cluster: windows by default
        f"{paths} TOTAL_SHARDS=6 SHARD_INDEX_OFFSET=0 MINIMUM_SHARD_INDEX=0 sbatch --parsable --array=0-4 {script} "
        f"--checkpoint-path {out} --request {request}",
        f"{paths} TOTAL_SHARDS=6 SHARD_INDEX_OFFSET=5 MINIMUM_SHARD_INDEX=0 sbatch --parsable --array=0 {script} "
        f"--checkpoint-path {out} --request {request}",
    ]
    assert not CheckpointLayout(out).run_file.exists(), "a dry run changes nothing"
    refused = cli("submit", *common, "--total-shards", "6", "--max-array-size", "none", "--dry-run", env=env,
                  cwd=tmp_path)
    assert "--array=0-5" in refused.stdout, "'none' lifts the limit"

    # Only shards 0-4 now; shard 5 is left for `retry --submit`, which must window it by itself.
    submitted = cli("submit", *common, "--total-shards", "6", "--array", "0-4", "--parallel", "2",
                    env=env, cwd=tmp_path).stdout.splitlines()
    jobs = [line.split()[0] for line in submitted]
    assert len(jobs) == 1
    run_json = json.loads(CheckpointLayout(out).run_file.read_text())
    assert run_json["total_shards"] == 6 and run_json["pipeline"]["output"] == "jsonl", "submit pins the contract"
    subprocess.run(["scancel", f"{jobs[0]}_4"], check=True)  # pending behind the %2 throttle
    other = cli("retry", "--checkpoint-path", str(out), "--submit", *common, "--", "--min-words", "3",
                env=env, cwd=tmp_path, check=False)
    assert other.returncode == 2 and "stages: jsonl_reader, jsonl_writer → jsonl_reader, word_count" in other.stderr
    refused = cli("retry", "--checkpoint-path", str(out), "--submit", *common, env=env, cwd=tmp_path, check=False)
    assert refused.returncode == 1 and "still queued or running" in refused.stderr, refused.stderr
    queued = json.loads(cli("status", "--checkpoint-path", str(out), "--json", env=env, cwd=tmp_path).stdout)
    assert queued["pending"] or queued["running"]

    watched = cli("status", "--checkpoint-path", str(out), "--watch", "--interval", "2", env=env, cwd=tmp_path,
                  check=False)  # refreshes until nothing of the run is queued
    assert watched.returncode == 3, watched.stderr
    frames = watched.stdout.split(str(out))
    assert any("running" in frame for frame in frames[:-1]), watched.stdout[:3000]
    assert "4/6 complete: complete 4, running 0, pending 0, failed 0, waiting 2" in watched.stdout
    assert "nothing of this run is queued any more; 2 shard(s) incomplete" in watched.stdout
    wait_for(jobs[0], 4, timeout=400)  # element 4 was cancelled while pending: it never ran
    assert job_states(jobs[0]).get("4", "CANCELLED").startswith("CANCELLED")
    done = sorted(int(p.stem.rsplit("_", 1)[1]) for p in CheckpointLayout(out).completion_dir.glob("completed_*"))
    assert done == [0, 1, 2, 3]

    retried = cli("retry", "--checkpoint-path", str(out), "--submit", *common, env=env, cwd=tmp_path).stdout
    lines = sorted(retried.splitlines(), key=lambda line: line.split()[-1])
    assert [line.split()[1:] for line in lines] == [
        ["--array=4", "SHARD_INDEX_OFFSET=0"], ["--array=0", "SHARD_INDEX_OFFSET=5"],
    ], retried
    for line in lines:
        wait_for(line.split()[0], 1, timeout=400)
    assert cli("retry", "--checkpoint-path", str(out), env=env, cwd=tmp_path).stdout == ""
    final = json.loads(cli("status", "--checkpoint-path", str(out), "--json", env=env, cwd=tmp_path).stdout)
    assert final["completed_count"] == 6 and final["incomplete"] == ""
    assert records_digest(read_records(out)) == records_digest(read_jsonl_inputs(data))

    # Another pipeline and shard count in the same checkpoint: refused, then a new logical run.
    refused = cli("submit", *common, "--total-shards", "2", "--", "--min-words", "50", env=env, cwd=tmp_path,
                  check=False)
    assert refused.returncode == 2 and "total_shards=2 (the run has 6)" in refused.stderr, refused.stderr
    renewed = cli("submit", *common, "--total-shards", "2", "--new-run", "--", "--min-words", "50", env=env, cwd=tmp_path)
    assert "archived the previous run's records" in renewed.stderr
    for line in renewed.stdout.splitlines():
        wait_for(line.split()[0], 2, timeout=400)
    [archive] = CheckpointLayout(out).archive_root.iterdir()
    assert len(list((archive / ".slurm_array_completion").glob("completed_*"))) == 6
    final = json.loads(cli("status", "--checkpoint-path", str(out), "--json", env=env, cwd=tmp_path).stdout)
    assert final["total_shards"] == 2 and final["completed_count"] == 2
    kept = [r for r in read_jsonl_inputs(data) if len((r.get("text") or "").split()) >= 50]
    assert records_digest(read_records(out)) == records_digest(kept), "every output now comes from the new pipeline"

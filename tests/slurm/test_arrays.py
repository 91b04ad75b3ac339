"""Job arrays on a real (throwaway) SLURM cluster, through the entrypoint, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from tests.conftest import REPO, curator_here, read_records, records_digest, visible_files
from tests.slurm.conftest import SLOW, entrypoint_line, job_script, sbatch, wait_for

pytestmark = pytest.mark.slurm


def manifests(checkpoint: Path) -> dict[int, dict]:
    found = {}
    for path in CheckpointLayout(checkpoint).completion_dir.glob("completed_slurm_array_*.json"):
        payload = json.loads(path.read_text())
        found[payload["shard_index"]] = payload
    return found


def raylet_pids(job: str) -> set[int]:
    """The raylets any element of SLURM job ``job`` started (other tests may run Ray meanwhile)."""
    out = subprocess.run(["pgrep", "-f", "ray/core/src/ray/raylet/raylet"], capture_output=True, text=True)
    mine = set()
    for pid in map(int, out.stdout.split()):
        try:
            variables = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"SLURM_ARRAY_JOB_ID={job}".encode() in variables or f"SLURM_JOB_ID={job}".encode() in variables:
            mine.add(pid)
    return mine


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory, sample_data_module, run_cluster):
    """An ordinary single-process run over the same inputs (in this process): the reference for every union."""
    out = tmp_path_factory.mktemp("unsharded") / "out"
    curator_here("run", "--input-dir", str(sample_data_module), "--output-dir", str(out), "--no-progress")
    return read_records(out)


def submit_env(input_dir: Path, out: Path, **extra: str) -> dict[str, str]:
    return {"INPUT_DIR": str(input_dir), "OUTPUT_DIR": str(out), **extra}


def test_array_of_four_single_node_elements(slurm_cluster, sample_data_module, unsharded, tmp_path):
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line()}")
    job = sbatch(script, "--array=0-3", env=submit_env(sample_data_module, out))
    states = wait_for(job, 4)
    assert set(states.values()) == {"COMPLETED"}, states
    found = manifests(out)
    assert sorted(found) == [0, 1, 2, 3]
    assert all(m["slurm_array_job_id"] == job and m["total_shards"] == 4 for m in found.values())
    union = read_records(out)
    assert records_digest(union) == records_digest(unsharded)
    assert len({r["id"] for r in union}) == len(union)
    element_jobs = ",".join(m["slurm_job_id"] for m in found.values())
    sacct = subprocess.run(["sacct", "-c", "-n", "-j", element_jobs, "-o", "JobID,State"], capture_output=True, text=True).stdout
    assert sorted(line.split()[1] for line in sacct.splitlines() if line.strip()) == ["COMPLETED"] * 4, sacct


def test_two_node_elements_form_one_ray_cluster_each(slurm_cluster, sample_data_module, unsharded, tmp_path):
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line('--worker-join-timeout', '90')}")
    job = sbatch(script, "--array=0-1", "--nodes=2", env=submit_env(sample_data_module, out))
    states = wait_for(job, 2)
    assert set(states.values()) == {"COMPLETED"}, (states, [p.read_text()[-3000:] for p in tmp_path.glob("slurm_*.out")])
    found = manifests(out)
    assert sorted(found) == [0, 1]
    for manifest in found.values():
        assert len({n["node_id"] for n in manifest["ray_nodes"]}) == 2
        assert manifest["slurm_num_nodes"] == 2 and manifest["slurm_nodelist"]
    assert records_digest(read_records(out)) == records_digest(unsharded)
    deadline = time.monotonic() + 20
    while raylet_pids(job) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not raylet_pids(job), "Ray processes outlived the job"
    rendezvous = CheckpointLayout(out).metadata_dir / ".ray_rendezvous"
    assert not list(rendezvous.rglob("auth_token")), "tokens are removed when the run ends"


def test_windows_with_offsets_and_minimum_index(slurm_cluster, sample_data_module, unsharded, tmp_path):
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line()}")
    jobs = [  # two windows of one element each: array task 0 is shard 0, then shard 1
        sbatch(script, "--array=0", env=submit_env(sample_data_module, out, TOTAL_SHARDS="2", SHARD_INDEX_OFFSET=str(offset)))
        for offset in (0, 1)
    ]
    for job in jobs:
        assert set(wait_for(job, 1).values()) == {"COMPLETED"}
    assert sorted(manifests(out)) == [0, 1]
    assert records_digest(read_records(out)) == records_digest(unsharded)

    out1 = tmp_path / "out-min1"
    job = sbatch(script, "--array=1-2", env=submit_env(sample_data_module, out1, MINIMUM_SHARD_INDEX="1"))
    assert set(wait_for(job, 2).values()) == {"COMPLETED"}
    assert sorted(manifests(out1)) == [1, 2]
    assert records_digest(read_records(out1)) == records_digest(unsharded)


def test_cancelled_element_is_retried_to_identical_outputs(slurm_cluster, sample_data_module, slow_baseline, tmp_path):
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line(SLOW)}")
    out = tmp_path / "out"
    job = sbatch(script, "--array=0-2", env=submit_env(sample_data_module, out, SLOW_SECONDS="3", SLOW_ONLY_ARRAY_TASK="1"))
    deadline = time.monotonic() + 120
    log = tmp_path / f"slurm_{job}_1.out"
    while time.monotonic() < deadline and not (log.exists() and "stage slow" in log.read_text()):
        time.sleep(0.5)
    subprocess.run(["scancel", f"{job}_1"], check=True)
    states = wait_for(job, 3)
    assert states["1"] == "CANCELLED" or states["1"].startswith("CANCELLED"), states
    assert 1 not in manifests(out)
    [stopped] = CheckpointLayout(out).failed_tasks_root.rglob("attempt_error.json")
    assert "received SIGTERM" in json.loads(stopped.read_text())["error"]

    fields = subprocess.run(["curator-array", "retry", "--checkpoint-path", str(out), "--format", "fields"],
                            capture_output=True, text=True, check=True, env=dict(os.environ, PATH=f"{REPO}/.venv/bin:{os.environ['PATH']}")).stdout
    assert fields == "1 0 0 3\n"
    array, offset, minimum, total = fields.split()
    retry_job = sbatch(script, f"--array={array}", env=submit_env(
        sample_data_module, out, SHARD_INDEX_OFFSET=offset, MINIMUM_SHARD_INDEX=minimum, TOTAL_SHARDS=total, SLOW_SECONDS="0.5"))
    assert set(wait_for(retry_job, 1).values()) == {"COMPLETED"}
    assert sorted(manifests(out)) == [0, 1, 2]
    assert visible_files(out) == visible_files(slow_baseline)
    for name in visible_files(out):
        assert (out / name).read_bytes() == (slow_baseline / name).read_bytes(), name


def test_two_elements_on_one_node_at_once(slurm_cluster, sample_data_module, unsharded, tmp_path):
    out = tmp_path / "out"
    script = job_script(tmp_path / "job.sh", f"cd {REPO}\n{entrypoint_line('--pipeline tests.slurm.slow_pipeline:build')}")
    job = sbatch(script, "--array=0-1", "--nodelist=node3", env=submit_env(sample_data_module, out, SLOW_SECONDS="0.5"))
    assert set(wait_for(job, 2).values()) == {"COMPLETED"}
    found = manifests(out)
    assert sorted(found) == [0, 1]
    assert {m["slurm_node_name"] for m in found.values()} == {"node3"}
    spans = sorted((m["started_at"], m["ended_at"]) for m in found.values())
    assert spans[1][0] <= spans[0][1], f"the two elements did not overlap: {spans}"
    assert records_digest(read_records(out)) == records_digest(unsharded)


def test_worker_node_that_never_joins_fails_the_head_by_name(slurm_cluster, sample_data_module, tmp_path):
    out = tmp_path / "out"
    body = (
        f"cd {REPO}\n"
        # --kill-on-bad-exit: the step ends when the head fails, not when the stand-in's sleep does
        "srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c 'if [ \"$SLURM_NODEID\" = 1 ]; then sleep 60; else exec "
        + entrypoint_line("--worker-join-timeout", "8").split(" ", 2)[2]
        + "; fi'"
    )
    script = job_script(tmp_path / "job.sh", body, ("#SBATCH --nodes=2",))
    began = time.monotonic()
    job = sbatch(script, env=submit_env(sample_data_module, out))
    states = wait_for(job, 1, timeout=180)
    assert list(states.values())[0].startswith("FAILED"), states
    log = next(tmp_path.glob("slurm_*.out")).read_text()
    assert "only 1 of 2 nodes joined" in log and "never started: node" in log, log[-2000:]
    assert not manifests(out)
    assert time.monotonic() - began < 120

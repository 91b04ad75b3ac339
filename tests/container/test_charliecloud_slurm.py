"""The .sqsh image under the throwaway SLURM cluster with Charliecloud, as pyxis would run it:
the entrypoint is called by path (the image's ENTRYPOINT is not executed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from curator_array.core.sharding import shard_of
from curator_array.stages.partition import group_task_id
from tests.conftest import SAMPLE, need, records_digest
from tests.slurm.conftest import JOBCOMP, job_script, sbatch, wait_for

pytestmark = [pytest.mark.container, pytest.mark.slurm]


def exit_codes(job_id: str) -> dict[str, str]:
    return {element: fields["ExitCode"] for element, fields in JOBCOMP.ended(job_id).items()}


def test_sqsh_array_with_charliecloud(slurm_cluster, sqsh, tmp_path):
    if not shutil.which("ch-run") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-qq", "charliecloud-runtime", "squashfuse"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    need(shutil.which("ch-run") is not None, "Charliecloud (ch-run) is not installed")
    data = tmp_path / "in"
    shutil.copytree(SAMPLE / "jsonl", data)
    (data / "bad.jsonl").write_text('{"text": "fine"}\n{"text": broken\n')
    bad_shard = shard_of(group_task_id(["bad.jsonl"]), 2)
    out = tmp_path / "out"
    body = (
        'export USER="${USER:-root}"\n'
        # ch-run makes its default mount point when it is missing, and two elements that start on
        # one host at once race to make it ("can't mkdir ... File exists"): it is made here first.
        'mkdir -p "/var/tmp/${USER}.ch/mnt"\n'
        f"srun --ntasks-per-node=1 ch-run --set-env {sqsh} -- "
        "/opt/curator-array/entrypoints/curator-array-entrypoint --num-cpus 1 "
        f"--object-store-memory {100 * 2**20} --no-progress"
    )
    script = job_script(tmp_path / "job.sh", body)
    job = sbatch(script, "--array=0-1", env={"INPUT_DIR": str(data), "OUTPUT_DIR": str(out)})
    states = wait_for(job, 2, timeout=300)
    good = 1 - bad_shard
    assert states[str(good)] == "COMPLETED", (states, [p.read_text()[-2000:] for p in tmp_path.glob("slurm_*.out")])
    assert states[str(bad_shard)] == "FAILED"
    assert exit_codes(job)[str(bad_shard)].startswith("3"), exit_codes(job)
    completion = out / ".nemo_curator_metadata" / ".slurm_array_completion"
    assert [p.name for p in completion.glob("completed_*.json")] == [f"completed_slurm_array_{good}.json"]
    manifest = json.loads((completion / f"completed_slurm_array_{good}.json").read_text())
    failed = list((out / ".nemo_curator_metadata" / ".failed_tasks").rglob("failed_tasks.json"))
    assert len(failed) == 1 and "bad.jsonl: line 2: malformed JSON record" in failed[0].read_text()
    expected_names = sorted(p.name for p in data.iterdir() if shard_of(group_task_id([p.name]), 2) == good)
    assert manifest["source_task_ids"] == sorted(group_task_id([name]) for name in expected_names)
    expected = [r for name in expected_names for r in read_input_file(data / name)]
    assert manifest["rows_out"] == len(expected) > 0
    good_outputs = sorted(f"{group_task_id([name])}.jsonl" for name in expected_names)
    assert manifest["output_files"] == good_outputs
    written = [r for name in good_outputs for r in read_input_file(out / name)]
    assert records_digest(written) == records_digest(expected), "the good shard's outputs = its inputs"


def read_input_file(path: Path) -> list[dict]:
    import gzip

    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]

"""The image under the real pyxis plugin and enroot, through the rendered pyxis site script:
`sbatch --array ... site_configs/local-pyxis.sbatch` with CONTAINER_IMAGE set to the `.sqsh`
from `make sqsh`, on the throwaway cluster (scripts/slurm_cluster.py loads pyxis)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLE, read_records, records_digest, visible_files
from tests.container.conftest import (
    RUN_OPTIONS,
    input_records,
    logs,
    manifests,
    sbatch_site,
    sha256,
)
from tests.slurm.conftest import cluster_script, pyxis_mode, queued, wait_all, wait_for
from tests.support.planted import write_corpus

pytestmark = [pytest.mark.pyxis, pytest.mark.container, pytest.mark.slurm]
SITE = REPO / "site_configs" / "local-pyxis.sbatch"
DEDUP_PHASES = ("signatures", "buckets", "clusters", "removal")


def submit(work: Path, sqsh: Path, out: Path, *args: str, **given) -> str:
    return sbatch_site(SITE, work, sqsh, out, *args, **given)


def test_array_of_three_through_the_pyxis_site(pyxis, sqsh, work):
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    out = work / "out"
    job = submit(work, sqsh, out, "--array=0-2", "--output-file-type", "parquet")
    states = wait_for(job, 3, timeout=400)
    assert set(states.values()) == {"COMPLETED"}, (states, logs(work))
    assert sorted(manifests(out)) == [0, 1, 2]
    assert "pyxis: imported docker image" not in logs(work) and "inside a container" not in logs(work)
    assert records_digest(read_records(out)) == records_digest(input_records(work / "in"))


def test_two_node_elements_form_one_ray_cluster_across_two_containers(pyxis, sqsh, work):
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    out = work / "out"
    # Four containers start at once on a 2-core host that runs other tests beside: a node may
    # take minutes to join, which is what the join timeout is for, not what this test checks.
    job = submit(work, sqsh, out, "--array=0-1", "--nodes=2", "--worker-join-timeout", "300")
    states = wait_for(job, 2, timeout=540)
    assert set(states.values()) == {"COMPLETED"}, (states, logs(work))
    for manifest in manifests(out).values():
        assert manifest["slurm_num_nodes"] == 2 and len({n["node_id"] for n in manifest["ray_nodes"]}) == 2
    assert "2 nodes → one Ray cluster over them (SlurmRayClient); this is node 1 (worker)" in logs(work)
    assert records_digest(read_records(out)) == records_digest(input_records(work / "in"))


def test_a_plain_user_runs_the_read_only_image_and_owns_the_outputs(pyxis, sqsh, work, plain_user):
    """In pyxis's default mode (the image unpacked per step by `enroot create`): a plain user
    needs user namespaces, which work here; squashfuse would also need /dev/fuse, which only
    root may open on these machines."""
    before = sha256(sqsh)
    os.chown(work, plain_user.pw_uid, plain_user.pw_gid)
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    out = work / "out"
    with pyxis_mode("create"):
        job = submit(work, sqsh, out, "--array=0-1", user=plain_user.pw_name)
        states = wait_for(job, 2, timeout=400)
    assert set(states.values()) == {"COMPLETED"}, (states, logs(work))
    written = [out / name for name in visible_files(out)]
    assert written and {p.stat().st_uid for p in [out, *written]} == {plain_user.pw_uid}
    assert {m["slurm_job_id"] for m in manifests(out).values()}
    assert records_digest(read_records(out)) == records_digest(input_records(work / "in"))
    with pyxis_mode("create"):
        probe = subprocess.run(
            ["runuser", "-u", plain_user.pw_name, "--", "env", f"SLURM_CONF={os.environ['SLURM_CONF']}", "srun",
             "-N1", f"--container-image={sqsh}", "sh", "-c", "id -u; touch /opt/curator-array/written-by-a-job"],
            capture_output=True, text=True, cwd=work)
    assert probe.returncode != 0 and probe.stdout.split()[0] == str(plain_user.pw_uid)
    assert "Read-only file system" in probe.stderr, probe.stderr
    assert sha256(sqsh) == before, "the image file is never changed"


SLOW_PIPELINE = (REPO / "tests" / "slurm" / "slow_pipeline.py").read_text()


def test_scancel_in_the_container_then_retry_gives_identical_outputs(pyxis, sqsh, work):
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    pipelines = work / "pipelines"  # mounted, so the container can import the test's pipeline
    pipelines.mkdir()
    (pipelines / "slow_pipeline.py").write_text(SLOW_PIPELINE)
    common = {"CONTAINER_MOUNTS": f"{pipelines}:{pipelines}:ro", "PYTHONPATH": str(pipelines)}
    args = ("--pipeline", "slow_pipeline:build", "--output-file-type", "parquet")
    baseline = work / "baseline"
    job = submit(work, sqsh, baseline, "--array=0-1", *args, env={**common, "SLOW_SECONDS": "0.2"})
    assert set(wait_for(job, 2, timeout=400).values()) == {"COMPLETED"}, logs(work)

    out = work / "out"
    job = submit(work, sqsh, out, "--array=0-1", *args, env={**common, "SLOW_SECONDS": "3", "SLOW_ONLY_ARRAY_TASK": "1"})
    log = work / f"slurm_{job}_1.out"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (log.exists() and "stage slow" in log.read_text()):
        time.sleep(0.5)
    subprocess.run(["scancel", f"{job}_1"], check=True)
    states = wait_for(job, 2, timeout=400)
    assert states["1"].startswith("CANCELLED") and 1 not in manifests(out), states
    fields = subprocess.run([str(REPO / ".venv" / "bin" / "curator-array"), "retry", "--checkpoint-path", str(out),
                             "--format", "fields"], capture_output=True, text=True, check=True).stdout
    assert fields == "1 0 0 2\n"
    array, offset, minimum, total = fields.split()
    retry = submit(work, sqsh, out, f"--array={array}", *args, env={
        **common, "SLOW_SECONDS": "0.2", "SHARD_INDEX_OFFSET": offset, "MINIMUM_SHARD_INDEX": minimum,
        "TOTAL_SHARDS": total})
    assert set(wait_for(retry, 1, timeout=400).values()) == {"COMPLETED"}, logs(work)
    assert sorted(manifests(out)) == [0, 1]
    assert visible_files(out) == visible_files(baseline)
    for name in visible_files(out):
        assert (out / name).read_bytes() == (baseline / name).read_bytes(), name


def test_a_mount_path_pyxis_cannot_express_stops_the_script(pyxis, sqsh, work):
    data = work / "in:put"
    shutil.copytree(SAMPLE / "jsonl", data)
    job = submit(work, sqsh, work / "out", "--array=0", data=data)
    states = wait_for(job, 1, timeout=120)
    assert states["0"].startswith("FAILED"), states
    assert f"pyxis cannot mount a path with ',' or ':': {data}" in logs(work)
    assert not (work / "out").exists() or not manifests(work / "out")


def test_cluster_cleanup_unmounts_and_removes_what_enroot_left(pyxis, sqsh, tmp_path):
    """What `slurm_cluster.py stop` does after the daemons: a squashfuse mount (as pyxis's
    use_squashfuse leaves when a step is killed) and an unpacked container, both gone."""
    cluster = cluster_script()
    root = tmp_path / "cluster"
    mount = root / "nodes" / "node1" / "enroot" / "runtime" / "user-0" / "mnt"
    container = root / "nodes" / "node1" / "enroot" / "data" / "user-0" / "pyxis_7.0"
    mount.mkdir(parents=True)
    (container / "etc").mkdir(parents=True)
    subprocess.run(["squashfuse", str(sqsh), str(mount)], check=True)
    assert (mount / "etc" / "rc").exists() and cluster.mounts_under(root) == [str(mount)]
    cluster.remove_containers(root)
    assert cluster.mounts_under(root) == [] and not container.exists() and not mount.exists()


def test_every_dedup_phase_runs_in_the_container_and_equals_a_host_run(pyxis, sqsh, work):
    """`submit --site local-pyxis -- --dedup fuzzy`: curation and the four dedup phases, each
    element in the image under real pyxis, give the files of the same run on the host."""
    planted = write_corpus(work / "in")
    options = [*RUN_OPTIONS, "--dedup", "fuzzy", "--dedup-buckets", "2"]
    curator = str(REPO / ".venv" / "bin" / "curator-array")
    subprocess.run([curator, "run", "--input-dir", str(work / "in"), "--output-dir", str(work / "host"), *options],
                   check=True, capture_output=True)
    env = dict(os.environ, INPUT_DIR=str(work / "in"), OUTPUT_DIR=str(work / "out"), CONTAINER_IMAGE=str(sqsh))
    done = subprocess.run([curator, "submit", "--site", "local-pyxis", "--sites-dir", str(SITE.parent),
                           "--total-shards", "2", "--", *options], capture_output=True, text=True, env=env, cwd=work)
    assert done.returncode == 0, done.stderr
    jobs = queued(done.stdout)
    assert [phase for _, phase, _ in jobs] == ["curation", *DEDUP_PHASES]
    wait_all(jobs)
    assert visible_files(work / "out") == visible_files(work / "host"), logs(work)
    assert all((work / "out" / name).read_bytes() == (work / "host" / name).read_bytes()
               for name in visible_files(work / "host"))
    assert planted.score({r["id"] for r in read_records(work / "out")}) == (1.0, 1.0)

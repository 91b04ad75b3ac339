"""The image under SLURM's own OCI containers: `srun --container` with runc, through the
rendered `local-oci` site script, on the throwaway cluster (its oci.conf names runc). The
bundle is `make oci`'s; each job writes its own (curator_array/slurm/oci_bundle.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from tests.conftest import REPO, SAMPLE, read_records, records_digest, visible_files
from tests.container.conftest import RUN_OPTIONS, input_records, logs, manifests, sbatch_site
from tests.slurm.conftest import queued, wait_all, wait_for
from tests.slurm.test_faults import driver_pid, wait_for_records

pytestmark = [pytest.mark.container, pytest.mark.slurm]
SITES = REPO / "site_configs"
SITE = SITES / "local-oci.sbatch"
CLI = str(REPO / ".venv" / "bin" / "curator-array")
SLOW_PIPELINE = (REPO / "tests" / "slurm" / "slow_pipeline.py").read_text()


@pytest.fixture
def oci(slurm_cluster, oci_bundle) -> Path:
    """The bundle of `make oci`, with the session's cluster (whose oci.conf runs runc) up."""
    return oci_bundle


def submit(work: Path, bundle: Path, out: Path, *args: str, **given) -> str:
    return sbatch_site(SITE, work, bundle, out, *args, **given)


def cli(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([CLI, *args], capture_output=True, text=True, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done


def test_an_array_of_three_one_node_elements(oci, work):
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    out = work / "out"
    job = submit(work, oci, out, "--array=0-2", "--output-file-type", "parquet")
    states = wait_for(job, 3, timeout=400)
    assert set(states.values()) == {"COMPLETED"}, (states, logs(work))
    assert sorted(manifests(out)) == [0, 1, 2]
    assert {p.suffix for p in out.iterdir() if not p.name.startswith(".")} == {".parquet"}
    assert records_digest(read_records(out)) == records_digest(input_records(work / "in"))
    bundles = CheckpointLayout(out).metadata_dir / ".oci_bundles"
    assert not list(bundles.iterdir()), "each job removes the bundle it wrote"


def test_a_two_node_element_is_one_ray_cluster_across_two_containers(oci, work):
    """No task-level variable reaches a container: the nodes number themselves in the rendezvous."""
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    out = work / "out"
    job = submit(work, oci, out, "--array=0", "--nodes=2", "--worker-join-timeout", "300")
    states = wait_for(job, 1, timeout=540)
    assert set(states.values()) == {"COMPLETED"}, (states, logs(work))
    [manifest] = manifests(out).values()
    assert manifest["slurm_num_nodes"] == 2 and len({n["node_id"] for n in manifest["ray_nodes"]}) == 2
    text = logs(work)
    assert "no SLURM_NODEID here" in text, "the batch shell's own SLURM_NODEID must not reach the containers"
    assert "this is node 0 of 2 (head + driver)" in text and "this is node 1 of 2 (worker)" in text, text
    assert records_digest(read_records(out)) == records_digest(input_records(work / "in"))


def test_a_killed_and_a_cancelled_element_then_retry_submit_equal_a_local_run(oci, work):
    """SIGKILL to one element's driver and `scancel` of another, mid-shard; `retry --submit`
    resubmits exactly those, and the outputs equal an uninterrupted run on the host byte for byte."""
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    pipelines = work / "pipelines"  # mounted, so the containers can import the test's pipeline
    pipelines.mkdir()
    (pipelines / "slow_pipeline.py").write_text(SLOW_PIPELINE)
    options = ["--pipeline", "slow_pipeline:build", "--output-file-type", "parquet", *RUN_OPTIONS]
    base = dict(os.environ, PYTHONPATH=str(pipelines), SLOW_SECONDS="0")
    local = work / "local"
    cli("run", "--input-dir", str(work / "in"), "--output-dir", str(local), *options, env=base, cwd=work)

    out = work / "out"
    env = dict(base, INPUT_DIR=str(work / "in"), OUTPUT_DIR=str(out), CONTAINER_IMAGE=str(oci),
               CONTAINER_MOUNTS=f"{pipelines}:{pipelines}:ro", SLOW_SECONDS="2",
               SBATCH_OUTPUT=f"{work}/slurm_%A_%a.out")
    submitted = cli("submit", "--site", "local-oci", "--sites-dir", str(SITES), "--total-shards", "3", "--",
                    *options, env=env, cwd=work)
    [(job, _, _)] = queued(submitted.stdout)
    wait_for_records(out, 0, 1, timeout=300)
    os.kill(driver_pid(job, "0"), signal.SIGKILL)
    wait_for_records(out, 1, 1, timeout=300)
    subprocess.run(["scancel", f"{job}_1"], check=True)
    states = wait_for(job, 3, timeout=400)
    assert states["0"] == "FAILED" and states["1"].startswith("CANCELLED") and states["2"] == "COMPLETED", states
    assert sorted(manifests(out)) == [2]

    retried = cli("retry", "--checkpoint-path", str(out), "--submit", "--site", "local-oci", "--sites-dir",
                  str(SITES), env=dict(env, SLOW_SECONDS="0.2"), cwd=work)
    wait_all(queued(retried.stdout))
    assert sorted(manifests(out)) == [0, 1, 2], logs(work)
    assert visible_files(out) == visible_files(local)
    for name in visible_files(local):
        assert (out / name).read_bytes() == (local / name).read_bytes(), name
    assert all(manifests(out)[shard].get("resumed_tasks", 0) >= 1 for shard in (0, 1)), \
        "the retry skipped the tasks recorded before the kill and the cancel"


def test_a_plain_user_runs_the_read_only_image_and_owns_the_outputs(oci, work, plain_user):
    """Rootless runc: the job's bundle maps the container's root to the user (a user namespace);
    the shared image cannot be written, and every file the job writes is the user's."""
    os.chown(work, plain_user.pw_uid, plain_user.pw_gid)
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    out = work / "out"
    job = submit(work, oci, out, "--array=0-1", user=plain_user.pw_name)
    states = wait_for(job, 2, timeout=400)
    assert set(states.values()) == {"COMPLETED"}, (states, logs(work))
    written = [out / name for name in visible_files(out)]
    assert written and {p.stat().st_uid for p in [out, *written]} == {plain_user.pw_uid}
    assert records_digest(read_records(out)) == records_digest(input_records(work / "in"))
    probe_bundle = work / "probe"
    subprocess.run(["runuser", "-u", plain_user.pw_name, "--", "python3", str(REPO / "curator_array" / "slurm" /
                    "oci_bundle.py"), str(oci), str(probe_bundle)], check=True)
    probe = subprocess.run(
        ["runuser", "-u", plain_user.pw_name, "--", "env", f"SLURM_CONF={os.environ['SLURM_CONF']}", "srun", "-N1",
         f"--container={probe_bundle}", "sh", "-c", "cat /proc/self/uid_map; touch /opt/curator-array/written"],
        capture_output=True, text=True, cwd=work)
    assert probe.returncode != 0 and probe.stdout.split()[:2] == ["0", str(plain_user.pw_uid)], probe.stdout
    assert "Read-only file system" in probe.stderr, probe.stderr
    assert not (oci / "rootfs" / "opt" / "curator-array" / "written").exists()


def test_a_bundle_that_is_not_one_stops_the_script_with_one_line(oci, work):
    shutil.copytree(SAMPLE / "jsonl", work / "in")
    job = submit(work, work / "in", work / "out", "--array=0")
    states = wait_for(job, 1, timeout=120)
    assert states["0"].startswith("FAILED"), states
    assert f"curator-array: {work / 'in'} is not an OCI bundle (make oci writes one)" in logs(work)
    assert not manifests(work / "out")


"""An object store on the real SLURM cluster: `submit` lists the input prefix on the login
node and freezes it, four array elements download and read their shards' objects from moto's
S3 server with the endpoint and keys of the submitting shell, and the run's output equals a
one-shard local run over the same files on disk; with the output on the store too, elements
killed mid-upload leave no object, and `retry --submit` finishes the run with the local run's
files as objects and no upload left open."""

from __future__ import annotations

import hashlib
import subprocess
import time

import pytest

from tests.slurm.conftest import queued, wait_all
from tests.slurm.test_dedup_on_slurm import curator, local_run
from tests.slurm.test_faults import render_test_site
from tests.support.s3_server import ThrottlingProxy, incompressible_jsonl, started

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
SECRET = "s3cr3t-of-the-submitting-shell-9c2e"


def digest(data: bytes) -> str:
    """What a file's bytes are compared by: a failed comparison of 10 MB values takes pytest's diff minutes."""
    return hashlib.sha256(data).hexdigest()


def test_four_elements_from_a_prefix_to_a_prefix_killed_mid_upload_retry_to_the_local_files(slurm_cluster, tmp_path):
    server = started()
    proxy = None
    try:
        inputs = tmp_path / "big"
        incompressible_jsonl(inputs, files=4, megabytes=10)
        server.upload(inputs, "s3://slurm-big/in")
        server.filesystem().create_dir("slurm-out")
        sites = tmp_path / "sites"
        sites.mkdir()
        render_test_site(sites)
        baseline, checkpoint = tmp_path / "baseline", tmp_path / "checkpoint"
        local_run("--input-dir", str(inputs), "--output-dir", str(baseline), *SMALL)
        proxy = ThrottlingProxy(server, refusals=0, part_delay_s=4.0)  # a slow link: uploads last seconds
        done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", "4", "--",
                       "--input-dir", "s3://slurm-big/in", "--output-dir", "s3://slurm-out/run",
                       "--checkpoint-path", str(checkpoint), *SMALL,
                       env={**proxy.env, "AWS_SECRET_ACCESS_KEY": SECRET}, cwd=sites)
        jobs = queued(done.stdout)
        deadline = time.monotonic() + 240
        while not server.uploads("slurm-out") and time.monotonic() < deadline:
            time.sleep(0.05)
        in_flight = server.uploads("slurm-out")
        subprocess.run(["scancel", "--signal=KILL", "--full", jobs[0][0]], check=True, capture_output=True)
        wait_all(jobs)
        assert in_flight, "no upload was caught in flight"
        assert not {key.removeprefix("run/") for key in in_flight} & set(server.objects("s3://slurm-out/run")), \
            "an object appeared before its upload completed"
        proxy.stop()
        proxy = None
        retried = curator("retry", "--checkpoint-path", str(checkpoint), "--submit", "--site", "test-site",
                          "--sites-dir", str(sites), env=server.env, cwd=sites)
        wait_all(queued(retried.stdout))
        assert curator("retry", "--checkpoint-path", str(checkpoint), "--format", "fields").stdout.strip() == ""
        assert server.uploads("slurm-out") == [], "the retry aborted the uploads the killed elements left"
        expected = {p.name: digest(p.read_bytes()) for p in baseline.iterdir()
                    if p.is_file() and not p.name.startswith(".")}
        written = {name: digest(data) for name, data in server.objects("s3://slurm-out/run").items()}
        assert written == expected and len(expected) == 4, "the union of four shards is the one-shard run, byte for byte"
        logs = "".join(log.read_text() for log in sites.glob("*.out"))
        assert SECRET not in logs and SECRET not in done.stdout + done.stderr, "the keys are never logged"
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()

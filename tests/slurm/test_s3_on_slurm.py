"""Inputs in an object store on the real SLURM cluster: `submit` lists the prefix on the login
node and freezes it, four array elements download and read their shards' objects from moto's
S3 server with the endpoint and keys of the submitting shell, and the run's output equals a
one-shard local run over the same files on disk."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE, need
from tests.slurm.conftest import queued, wait_all
from tests.slurm.test_dedup_on_slurm import curator
from tests.slurm.test_faults import render_test_site
from tests.support.s3_server import S3Server

pytestmark = [pytest.mark.slurm, pytest.mark.ray]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
SECRET = "s3cr3t-of-the-submitting-shell-9c2e"


def visible(out):
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.name.startswith(".")}


def test_four_elements_read_a_prefix_as_one_shard_reads_the_files(slurm_cluster, tmp_path):
    server = S3Server()
    try:
        server.start()
    except RuntimeError as problem:
        need(False, str(problem))
    try:
        server.upload(SAMPLE / "jsonl", "s3://slurm-inputs/jsonl")
        env = {**server.env, "AWS_SECRET_ACCESS_KEY": SECRET}
        sites = tmp_path / "sites"
        sites.mkdir()
        render_test_site(sites)
        baseline, out = tmp_path / "baseline", tmp_path / "out"
        curator("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", str(baseline), *SMALL)
        done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", "4", "--",
                       "--input-dir", "s3://slurm-inputs/jsonl", "--output-dir", str(out), *SMALL, env=env, cwd=sites)
        jobs = queued(done.stdout)
        assert [(p, n) for _, p, n in jobs] == [("curation", 4)], done.stdout
        wait_all(jobs)
        assert curator("retry", "--checkpoint-path", str(out), "--format", "fields").stdout.strip() == ""
        assert visible(out) == visible(baseline) != {}, "the union of four shards is the one-shard run, byte for byte"
        logs = "".join(log.read_text() for log in sites.glob("*.out"))
        assert SECRET not in logs and SECRET not in done.stdout + done.stderr, "the keys are never logged"
    finally:
        server.stop()

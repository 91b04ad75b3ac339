"""Selection by model on the real SLURM cluster: one `submit` queues the curation shards and
the three quality phases; an element of the phase that removes the documents below the
run-wide threshold is SIGKILLed mid-work, `retry` names exactly it, and one `retry --submit`
finishes the run with the files of an uninterrupted local run, byte for byte."""

from __future__ import annotations

import json

import pytest

from tests.conftest import need
from tests.slurm.conftest import queued, wait_all
from tests.slurm.test_dedup_on_slurm import HOLD, curator, kill_when_held, local_run, retry_fields
from tests.slurm.test_faults import render_test_site
from tests.support.quality_corpus import paragraphs, train_model, trainer_installed, write_jsonl

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
PHASES = ("quality_scores", "quality_cut", "quality_selection")


def visible(out):
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(out).parts)}


def test_a_selection_element_killed_is_retried_to_the_uninterrupted_output(slurm_cluster, tmp_path):
    need(trainer_installed(), "the fastText trainer is not installed (make install does it)")
    inputs, sites = tmp_path / "in", tmp_path / "sites"
    documents = paragraphs()
    for part in range(4):
        write_jsonl(inputs / f"part-{part}.jsonl", documents[part::4])
    sites.mkdir()
    render_test_site(sites)
    model = train_model(tmp_path / "model")
    quality = ["--quality-model", f"hq={model}", "--keep-top-fraction", "hq=0.2", "--quality-buckets", "3",
               "--partition-by-bucket"]
    baseline, out, marker = tmp_path / "baseline", tmp_path / "out", tmp_path / "held"
    local_run("--input-dir", str(inputs), "--output-dir", str(baseline), *SMALL, *quality)
    done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", "2", "--",
                   "--input-dir", str(inputs), "--output-dir", str(out), *SMALL, *quality,
                   env={HOLD: f"quality_selection:0:{marker}"}, cwd=sites)
    jobs = queued(done.stdout)
    assert [(p, n) for _, p, n in jobs] == [("curation", 2), ("quality_scores", 2), ("quality_cut", 1),
                                            ("quality_selection", 2)], done.stdout
    kill_when_held(marker, jobs, "quality_selection")
    wait_all(jobs)
    assert retry_fields(out) == "0 0 0 2 quality_selection"
    status = curator("status", "--checkpoint-path", str(out)).stdout
    assert "quality_selection 1/2; missing 0" in status, status
    done = curator("retry", "--checkpoint-path", str(out), "--submit", "--site", "test-site", "--sites-dir",
                   str(sites), cwd=sites)
    wait_all(queued(done.stdout))
    assert retry_fields(out) == ""
    phases = {p["phase"]: p for p in json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
              ["phases"]}
    assert [phases[p]["complete"] for p in PHASES] == [2, 1, 2]
    kept = phases["quality_selection"]["counts"]["rows_out"]
    assert abs(kept / len(documents) - 0.2) * 100 < 0.1
    assert visible(out) == visible(baseline), "the same files, byte for byte, as an uninterrupted run"
    assert all(name.startswith("bucket=") for name in visible(out))

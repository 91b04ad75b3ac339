"""``--pipeline dclm`` on the real SLURM cluster: a 4-shard array of DCLM-Pool-shaped JSONL,
in DCLM-Baseline's order (the rules, the paragraph dedup over the whole run, then a quality
model with DCLM-Baseline's threshold, all given by the pipeline, not by flags), writes the
files a local one-shard run writes, byte for byte, and counts the same drops and removed
lines and paragraphs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import need
from tests.integration.test_dclm_run import pages
from tests.slurm.test_dedup_on_slurm import curator, local_and_array
from tests.slurm.test_faults import render_test_site
from tests.slurm.test_quality_on_slurm import visible
from tests.support.quality_corpus import train_model, trainer_installed, write_jsonl

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def counted(out) -> dict:
    report = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    phases = {p["phase"]: p["counts"] for p in report["phases"]}
    return {"dropped": report["dropped"], "lines": report["lines_removed"],
            "threshold": report["options"]["quality_threshold"], "paragraphs": phases["paragraph_removal"],
            "late": phases["quality_after_dedup"]}


def test_four_shards_write_what_one_shard_writes(slurm_cluster, tmp_path):
    need(trainer_installed(), "the fastText trainer is not installed (make install does it)")
    inputs, sites = tmp_path / "in", tmp_path / "sites"
    documents = [d for d in pages() if isinstance(d["text"], str)]
    for part in range(4):
        write_jsonl(inputs / f"part-{part}.jsonl", documents[part::4])
    sites.mkdir()
    render_test_site(sites)
    model = train_model(tmp_path / "model")
    recipe = ["--pipeline", "dclm", "--input-file-type", "jsonl", "--quality-model", f"hq={model}"]
    baseline, out = local_and_array(inputs, tmp_path, sites, *SMALL, *recipe,
                                    phases=("curation", "paragraph_ngrams", "paragraph_buckets", "paragraph_removal",
                                            "quality_after_dedup"))
    assert visible(out) == visible(baseline) and visible(out), "the same files, byte for byte"
    ours, theirs = counted(out), counted(baseline)
    assert ours == theirs
    assert ours["dropped"]["dclm.language_filter"] > 0 and ours["lines"]
    assert "0.018112" in json.dumps(ours["threshold"])
    assert ours["paragraphs"]["paragraphs_removed"] > 0, "the pages' repeated paragraphs"
    assert "quality_model.hq" not in ours["dropped"] and ours["late"]["rows_in"] == ours["paragraphs"]["rows_out"], \
        "the model decides after the dedup, on what it left"

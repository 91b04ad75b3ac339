"""Decontamination on the real SLURM cluster: `submit` builds the eval sets' index on the
login node, four array elements check their shards against it, and the run's output, its
removed documents and its contamination tally equal a one-shard local run's."""

from __future__ import annotations

import json

import pytest

from tests.slurm.test_dedup_on_slurm import curator, local_and_array
from tests.slurm.test_faults import render_test_site
from tests.support.decont_corpus import eval_and_corpus
from tests.support.quality_corpus import write_jsonl

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def outputs(out):
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*.jsonl")
            if not any(part.startswith(".") and part != ".removed" for part in p.relative_to(out).parts)}


def test_four_elements_decontaminate_as_one_shard_does(slurm_cluster, tmp_path):
    records, corpus = eval_and_corpus(eval_records=30, clean=120)
    evals = write_jsonl(tmp_path / "evals" / "benchmarks.jsonl", records)
    inputs, sites = tmp_path / "in", tmp_path / "sites"
    for part in range(8):
        write_jsonl(inputs / f"part-{part}.jsonl", [{"id": d["id"], "text": d["text"]} for d in corpus[part::8]])
    sites.mkdir()
    render_test_site(sites)
    decont = ["--decontaminate", str(evals), "--keep-removed"]
    baseline, out = local_and_array(inputs, tmp_path, sites, *SMALL, *decont)
    assert curator("retry", "--checkpoint-path", str(out), "--format", "fields").stdout.strip() == ""
    assert outputs(out) == outputs(baseline), "the same kept and removed documents, file by file"
    assert any(name.startswith(".removed/pipeline/") for name in outputs(out))
    mine, theirs = (json.loads(curator("status", "--checkpoint-path", str(path), "--json").stdout)
                    for path in (out, baseline))
    assert mine["contamination"] == theirs["contamination"] and mine["dropped"] == theirs["dropped"]
    assert sum(figures[0] for figures in mine["contamination"]["tasks"].values()) > 60

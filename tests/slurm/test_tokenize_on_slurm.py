"""Tokenize phases on the real SLURM cluster, writing one shuffled token-file set per tier: a
tokenize element SIGKILLed mid-write leaves no token file under a final name, `retry` names it, the merge queued after it ends at once
(its input is incomplete), and one `retry --submit` finishes the run with the same token
files, byte for byte, as an uninterrupted run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from tests.slurm.conftest import queued, wait_all
from tests.slurm.test_dedup_on_slurm import HOLD, SMALL, curator, kill_when_held, local_run
from tests.slurm.test_faults import render_test_site
from tests.support.planted import write_corpus
from tests.support.tokenizer import train_tokenizer

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SHARDS = 2


@pytest.fixture(scope="module")
def tokenizing(slurm_cluster, tmp_path_factory):
    """The planted corpus, a tokenizer, a bare-metal site, and the token files of an
    uninterrupted run with the same shards."""
    root = tmp_path_factory.mktemp("tokenize-slurm")
    inputs = root / "in"
    write_corpus(inputs)
    texts = []
    for path in sorted(inputs.iterdir()):
        documents = [json.loads(line) for line in path.read_text().splitlines()]
        texts += [document["text"] for document in documents]
        path.write_text("".join(json.dumps({**d, "tier": ("high", "low", "mid")[d["n"] % 3]}) + "\n" for d in documents))
    options = ["--tokenize", str(train_tokenizer(texts, root / "tokenizer.json", 2000)), "--token-file-size", "12K",
               "--token-partition-by", "tier"]
    sites = root / "sites"
    sites.mkdir()
    render_test_site(sites)
    baseline = root / "baseline"
    for shard in range(SHARDS):
        local_run("--input-dir", str(inputs), "--output-dir", str(baseline), *SMALL, *options,
                env={"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": str(shard),
                     "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": str(SHARDS)})
    return inputs, sites, options, token_files(baseline)


def token_files(out: Path) -> dict[str, bytes]:
    found = {str(p.relative_to(out / "tokens")): p.read_bytes() for p in (out / "tokens").rglob("*") if p.is_file()}
    assert {name.split("/")[0] for name in found if "/" in name} == {"tier=high", "tier=low", "tier=mid"}
    return found


def test_a_tokenize_element_killed_mid_write_is_retried_to_the_same_files(tokenizing, tmp_path):
    inputs, sites, options, baseline = tokenizing
    out, marker = tmp_path / "out", tmp_path / "held"
    hold = {HOLD: f"tokenize:0:{marker}", "CURATOR_ARRAY_TEST_HOLD_AT": "1"}  # after its first file
    done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", str(SHARDS), "--",
                   "--input-dir", str(inputs), "--output-dir", str(out), *SMALL, *options, env=hold, cwd=sites)
    jobs = queued(done.stdout)
    assert [phase for _, phase, _ in jobs] == ["curation", "tokenize", "tokens"], done.stdout
    kill_when_held(marker, jobs, "tokenize")
    wait_all(jobs)
    data = CheckpointLayout(out).phases_root / "tokenize" / "data"
    written = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert not [name for name in written if "shard_0" in name], \
        "the killed element's files are under no final name"
    assert {name.split("/")[1] for name in written if name.startswith("sets/")} == {"tier=high", "tier=low", "tier=mid"}
    assert {name for name in written if name.endswith("shard_1.keys")} and "shard_1.sets.json" in written, \
        "shuffled: each file's keys beside it"
    assert curator("retry", "--checkpoint-path", str(out), "--format", "fields").stdout == "0 0 0 2 tokenize\n"
    status = curator("status", "--checkpoint-path", str(out)).stdout
    assert "tokens     0/1; missing 0; blocked by tokenize (missing 0)" in status
    assert "element 0 failed: tokens element 0 cannot start: tokenize shard(s) 0" in status
    assert not (out / "tokens" / "manifest.json").exists()
    done = curator("retry", "--checkpoint-path", str(out), "--submit", "--site", "test-site", "--sites-dir", str(sites),
                   cwd=sites)
    wait_all(queued(done.stdout))
    assert curator("retry", "--checkpoint-path", str(out)).stdout == ""
    assert token_files(out) == baseline, "the same token files, byte for byte, as an uninterrupted run"

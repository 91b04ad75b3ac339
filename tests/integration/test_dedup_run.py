"""Dedup across a whole run, through `curator-array run`: the curation phase on a real Ray
head, then the signatures, buckets, clusters and removal phases, on planted duplicates.

What must hold: the planted copies go and nothing else does (precision and recall 1.0),
the answer does not depend on shards or buckets, every field survives, the visible output
holds only the kept documents, and bad input is refused with exit 2 without losing anything.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from curator_array.run.phases import PHASES as REGISTRY
from tests.conftest import curator_here as curator
from tests.conftest import read_records
from tests.support.planted import write_corpus, write_doubled_corpus

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
PHASES = ("signatures", "buckets", "clusters", "removal")
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def run(inputs: Path, out: Path, *extra: str, shard: tuple[int, int] | None = None, check: bool = True):
    env = {} if shard is None else {"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": str(shard[0]),
                                    "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": str(shard[1])}
    return curator("run", "--input-dir", str(inputs), "--output-dir", str(out), *SMALL, *extra, env=env, check=check)


def visible(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.name.startswith(".")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("planted") / "in"
    return directory, write_corpus(directory)


@pytest.fixture(scope="module")
def one_shard(corpus, tmp_path_factory):
    inputs, _ = corpus
    out = tmp_path_factory.mktemp("one") / "out"
    run(inputs, out, "--dedup", "fuzzy")
    return out


def test_fuzzy_dedup_removes_the_planted_copies_and_nothing_else(corpus, one_shard):
    _, planted = corpus
    records = read_records(one_shard)
    kept = {r["id"] for r in records}
    assert planted.score(kept) == (1.0, 1.0)
    assert len(records) == len(kept) == len(planted.ids) - len(planted.original_of)
    originals = {json.loads(line)["id"]: json.loads(line) for f in sorted(corpus[0].iterdir())
                 for line in f.read_text().splitlines()}
    sizes = {r["id"]: r.pop("minhash_cluster_size") for r in records}
    assert all(r == originals[r["id"]] for r in records), "every field of a kept document is kept as read"
    copies = collections.Counter(planted.original_of.values())
    group = {i: planted.original_of.get(i, i) for i in kept}  # whichever of a planted group is kept
    assert sizes == {i: 1 + copies[group[i]] for i in kept}, "each kept document carries its cluster's size"
    assert not [p for p in one_shard.rglob("*") if ".tmp-" in p.name], "no partial file left"
    status = curator("status", "--checkpoint-path", str(one_shard), "--json")
    phases = {p["phase"]: p for p in json.loads(status.stdout)["phases"]}
    assert [phases[p]["complete"] for p in PHASES] == [1, 1, 1, 1]
    assert phases["removal"]["counts"]["removed"] == len(planted.original_of)


def test_three_shards_and_three_buckets_give_the_same_output(corpus, one_shard, tmp_path):
    inputs, _ = corpus
    out = tmp_path / "out"
    for shard in range(3):
        done = run(inputs, out, "--dedup", "fuzzy", "--dedup-buckets", "3", shard=(shard, 3))
        if shard < 2:
            assert "later phases: signatures waits for curation shard(s)" in done.stderr
    assert "later phases complete" in done.stderr
    assert visible(out) == visible(one_shard), "byte for byte the files of a one-shard run"
    layout = CheckpointLayout(out)
    assert sorted(p.name for p in REGISTRY.get("buckets").layout_of(layout).data_dir.iterdir()) == \
        ["bucket_0.pairs", "bucket_1.pairs", "bucket_2.pairs"]


def test_the_clusters_over_four_elements_in_rounds_give_one_elements_output(tmp_path):
    inputs = tmp_path / "in"
    write_doubled_corpus(inputs)
    one, four = tmp_path / "one", tmp_path / "four"
    run(inputs, one, "--dedup", "fuzzy")
    for shard in range(2):
        run(inputs, four, "--dedup", "fuzzy", "--dedup-components-elements", "4", "--dedup-keep-removed",
            shard=(shard, 2))
    assert visible(four) == visible(one), "byte for byte the files of one clusters element"
    report = json.loads(curator("status", "--checkpoint-path", str(four), "--json").stdout)
    phases = {p["phase"]: p for p in report["phases"]}
    assert "clusters" not in phases and phases["components"]["complete"] == 4
    clusters = json.loads(curator("status", "--checkpoint-path", str(one), "--json").stdout)["phases"][2]
    counts = phases["components"]["counts"]
    assert counts["steps"] >= 3, "cliques of four copies are no stars: it took rounds"
    assert (counts["removed"], counts["clusters"], counts["cluster_sizes"]) == \
        (clusters["counts"]["removed"], clusters["counts"]["clusters"], clusters["counts"]["cluster_sizes"])
    assert counts["cluster_sizes"]["4"] == 80, "each of the 80 planted originals with its copy, twice"
    steps = REGISTRY.get("components").layout_of(CheckpointLayout(four)).data_dir
    assert [p.name for p in steps.iterdir()] == [f"step_{counts['steps'] - 1}"], "only the final labels are left"
    removed = read_records(four / ".removed" / "dedup")
    assert len(removed) == counts["removed"] and all(r["minhash_kept_id"] for r in removed)


def test_removed_documents_can_be_kept_for_an_audit(corpus, tmp_path):
    inputs, planted = corpus
    out = tmp_path / "out"
    run(inputs, out, "--dedup", "fuzzy", "--dedup-keep-removed")
    originals = {json.loads(line)["id"]: json.loads(line) for f in sorted(inputs.iterdir())
                 for line in f.read_text().splitlines()}
    removed = read_records(out / ".removed" / "dedup")
    kept = {r["id"] for r in read_records(out)}
    assert {r["id"] for r in removed} == set(planted.ids) - kept, "every removed copy, and only those"
    for record in removed:
        kept_id = record.pop("minhash_kept_id")
        file, row = record.pop("minhash_kept").rsplit("#", 1)
        assert planted.original_of.get(kept_id, kept_id) == planted.original_of.get(record["id"], record["id"]), \
            "the id of the copy kept, of the same planted group"
        assert json.loads((out / ".curated" / file).read_text().splitlines()[int(row)])["id"] == kept_id, \
            "and where it is (its row of the curated file)"
        assert record == originals[record["id"]], "every field, as curated"
    audit = out / ".removed" / "dedup"
    first = {**visible(out), **{f"audit/{name}": data for name, data in visible(audit).items()}}
    run(inputs, out, "--dedup", "fuzzy", "--dedup-keep-removed", "--phase", "removal", "--force", "--num-cpus", "2")
    assert {**visible(out), **{f"audit/{name}": data for name, data in visible(audit).items()}} == first, \
        "the removal over two worker processes writes the same bytes as over one"


def test_exact_mode_and_verified_pairs(corpus, tmp_path):
    inputs, planted = corpus
    run(inputs, tmp_path / "exact", "--dedup", "exact")
    exact = {r["id"] for r in read_records(tmp_path / "exact")}
    equal = [c for c, kind in planted.kinds.items() if kind in ("exact", "case")]
    assert all((c in exact) != (planted.original_of[c] in exact) for c in equal), "one of each equal pair is kept"
    assert len(set(planted.ids) - exact) == len(equal), "only documents equal after normalisation go"
    run(inputs, tmp_path / "strict", "--dedup", "fuzzy", "--dedup-verify", "--dedup-threshold", "0.99")
    strict = {r["id"] for r in read_records(tmp_path / "strict")}
    assert strict == exact, "pairs below the Jaccard threshold (the 1%-edited copies) are not removed"
    run(inputs, tmp_path / "exact-verified", "--dedup", "exact", "--dedup-verify")
    assert {r["id"] for r in read_records(tmp_path / "exact-verified")} == exact


def test_dedup_against_an_earlier_run(corpus, one_shard, tmp_path):
    """A second crawl that repeats documents of the first: its copies go, its own pages stay."""
    inputs, _ = corpus
    second = tmp_path / "second"
    fresh = write_corpus(tmp_path / "fresh", files=3, seed=9, prefix="new")
    second.mkdir()
    repeated = [line for line in (inputs / "part-000.jsonl").read_text().splitlines()[:15]]
    (second / "repeats.jsonl").write_text("\n".join(repeated) + "\n")
    for path in (tmp_path / "fresh").iterdir():
        (second / path.name).write_text(path.read_text())
    before = visible(one_shard)
    out = tmp_path / "out"
    run(second, out, "--dedup", "fuzzy", "--dedup-against", str(one_shard))
    kept = {r["id"] for r in read_records(out)}
    assert not kept & {json.loads(line)["id"] for line in repeated}, "copies of the earlier run's documents go"
    assert fresh.score(kept & set(fresh.ids)) == (1.0, 1.0), "the new run's own duplicates are handled as usual"
    assert visible(one_shard) == before, "the earlier run is only read"


def test_bad_input_is_refused_with_exit_2_and_loses_nothing(corpus, one_shard, tmp_path):
    inputs, _ = corpus
    out = tmp_path / "out"
    run(inputs, out, "--dedup", "fuzzy", shard=(0, 2))  # shard 1 never ran
    phase = run(inputs, out, "--dedup", "fuzzy", "--phase", "signatures", shard=(1, 2), check=False)
    assert phase.returncode == 2 and "signatures element 1 cannot start: curation shard(s) 1" in phase.stderr
    phase = run(inputs, out, "--dedup", "fuzzy", "--phase", "buckets", shard=(0, 2), check=False)
    assert phase.returncode == 2 and "signatures shard(s) 0-1" in phase.stderr, "signatures wait for every curation shard"
    status = curator("status", "--checkpoint-path", str(out)).stdout
    assert "buckets    0/2; missing 0-1; blocked by curation (missing 1)" in status
    assert "element 0 failed: buckets element 0 cannot start" in status
    changed = run(inputs, out, "--dedup", "fuzzy", "--dedup-bands", "10", shard=(1, 2), check=False)
    assert changed.returncode == 2 and "dedup.bands: 14 → 10" in changed.stderr
    assert not visible(out), "nothing reaches the output dir before the removal phase"
    other = run(inputs, tmp_path / "against", "--dedup", "exact", "--dedup-against", str(one_shard), check=False)
    assert other.returncode == 2 and "--dedup-against" in other.stderr and "the settings must be equal" in other.stderr
    assert not list(tmp_path.glob("against/**/*.jsonl")), "refused before any work"
    no_dedup = tmp_path / "plain"
    run(inputs, no_dedup)
    refused = curator("run", "--input-dir", str(inputs), "--output-dir", str(no_dedup), "--phase", "clusters",
                      check=False)
    assert refused.returncode == 2 and "dedup" in refused.stderr


def test_the_report_shows_each_phase_and_the_cluster_sizes(corpus, one_shard, tmp_path):
    _, planted = corpus
    page = tmp_path / "report.html"
    curator("report", "--checkpoint-path", str(one_shard), "-o", str(page))
    html = page.read_text()
    assert "<h2 id=\"phases\">Phases</h2>" in html and "Duplicate clusters by size" in html
    assert "<td>curation</td><td>1/1</td>" in html, "the first phase is a phase like the others"
    assert f"removed {len(planted.original_of)}" in html and "<td>removal</td><td>1/1</td>" in html


def test_status_shows_the_final_figures_and_every_drop(corpus, tmp_path):
    """The headline rows out is the output's own count after dedup, the drops by step include
    the dedup removals and add up, and skipped malformed lines are counted in the task's log
    line and in status."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for path in sorted(corpus[0].iterdir()):
        (inputs / path.name).write_bytes(path.read_bytes())
    first = sorted(inputs.iterdir())[0]
    first.write_text(first.read_text() + "{not json\n")
    out = tmp_path / "out"
    result = run(inputs, out, "--dedup", "fuzzy", "--min-words", "20", "--malformed", "skip")
    assert "1 malformed lines skipped" in result.stderr
    records = read_records(out)
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    assert status["final_rows_out"] == len(records)
    dropped = status["dropped"]
    assert dropped.get("removal.removed") and all(count > 0 for count in dropped.values()), dropped
    assert status["totals"]["rows_in"] - sum(dropped.values()) == len(records), "the figures add up"
    assert status["records_skipped"] == {"malformed_lines": 1}
    text = curator("status", "--checkpoint-path", str(out)).stdout
    assert f"{len(records):,} rows out after removal" in text
    assert f"removal.removed {dropped['removal.removed']:,}" in text and "Input records skipped (--malformed skip), by kind: malformed_lines 1" in text

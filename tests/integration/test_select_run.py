"""`curator-array select` on real text: annotate once, select three ways, and each selection holds
the documents a run that decided the same directly keeps; what a selection cannot trust (an
unfinished run, a run that changed under it, an expression that names no column or reaches for
a file) is refused in one line before any element starts."""

from __future__ import annotations

import pytest

from tests.conftest import curator_here as curator
from tests.integration.test_annotate_run import (
    SMALL,
    documents_with_planted_drops,
    rows_of,
    status_of,
)
from tests.support.quality_corpus import train_model, write_jsonl

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
RULES = ["--drop-empty", "--min-words", "8", "--max-words", "300", "--dedup-within-task"]
# Each way: the selection's expression, and the options of a run that decides the same directly.
WAYS = {
    "as the rules decided": ("would_drop IS NULL", []),
    "a score at least": ("would_drop IS NULL AND q >= 0.5", ["--quality-threshold", "q=0.5"]),
    "a score at most and a length": ("would_drop IS NULL AND q <= 0.8 AND length(text) < 900",
                                     ["--quality-threshold", "q<=0.8", "--where", "length(text) < 900"]),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("select")
    documents = documents_with_planted_drops()
    for part in range(3):
        write_jsonl(root / "in" / f"part-{part}.jsonl", documents[part::3])
    model = train_model(root / "model")
    tagged = root / "tagged"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(tagged), "--annotate", *RULES,
            "--quality-model", f"q={model}", "--output-file-type", "parquet", *SMALL)
    return root, model, tagged


@pytest.mark.parametrize("way", list(WAYS))
def test_a_selection_keeps_what_deciding_directly_keeps(world, way):
    root, model, tagged = world
    expression, direct_options = WAYS[way]
    selected, direct = root / f"selected-{way}", root / f"direct-{way}"
    curator("select", "--select-from", str(tagged), "--output-dir", str(selected), "--where", expression, *SMALL)
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(direct), *RULES,
            "--quality-model", f"q={model}", *direct_options, *SMALL)
    chosen = {row["id"]: row for row in rows_of(selected)}
    kept = {row["id"]: row for row in rows_of(direct)}
    assert set(chosen) == set(kept) and 0 < len(kept)
    assert all(chosen[key]["text"] == kept[key]["text"] and chosen[key]["q"] == kept[key]["q"] for key in kept)
    every = len(rows_of(tagged))
    assert status_of(selected)["dropped"] == ({"where": every - len(kept)} if every > len(kept) else {})
    if way != "as the rules decided":
        assert len(kept) < len(rows_of(root / "selected-as the rules decided")), "the score chose too"


def test_a_selection_pins_the_run_it_read_and_refuses_it_changed(world, tmp_path):
    root, model, _ = world
    source = tmp_path / "source"
    options = ["--input-dir", str(root / "in"), "--output-dir", str(source), "--annotate", "--min-words", "8", *SMALL]
    curator("run", *options)
    selected = tmp_path / "selected"
    select = ["select", "--select-from", str(source), "--output-dir", str(selected), "--where", "would_drop IS NULL",
              *SMALL]
    curator(*select)
    pinned = status_of(selected)
    curator("run", *options, "--force")  # the same options and run, its shard done again
    refused = curator(*select, check=False)
    assert refused.returncode == 2
    assert "the run changed since this selection began: its manifests changed" in refused.stderr
    assert status_of(selected)["completed_count"] == pinned["completed_count"] == 1, "nothing of it was lost"
    curator(*select, "--new-run")
    assert {row["id"] for row in rows_of(selected)} == {
        row["id"] for row in rows_of(source) if row["would_drop"] is None}


def test_an_unfinished_run_is_refused(world, tmp_path):
    root, _, _ = world
    source = tmp_path / "half"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(source), "--annotate", *SMALL,
            env={"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "0", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "2"})
    refused = curator("select", "--select-from", str(source), "--output-dir", str(tmp_path / "out"), *SMALL,
                      check=False)
    assert refused.returncode == 2
    assert "the run is not complete: its curation phase misses 1 of 2 element(s) (1)" in refused.stderr


@pytest.mark.parametrize("expression, message", [
    ("nope > 1", 'Referenced column "nope" not found'),
    ("(SELECT count(*) FROM read_csv('/etc/passwd')) > 0", "file system operations are disabled"),
    ("q > 0.5; DROP TABLE t", "more than one statement"),
])
def test_an_expression_that_cannot_run_is_refused_before_any_element(world, tmp_path, expression, message):
    _, _, tagged = world
    out = tmp_path / "out"
    refused = curator("select", "--select-from", str(tagged), "--output-dir", str(out), "--where", expression,
                      *SMALL, check=False)
    assert refused.returncode == 2 and message in refused.stderr
    assert not list(out.glob("*.parquet"))


def test_a_selection_ranks_the_whole_run_by_a_score_it_carries(world):
    """--quality-column: the run-wide top fraction and buckets of a score the tagged run wrote,
    as a run that scores with the model decides them."""
    root, model, tagged = world
    ranking = ["--keep-top-fraction", "q=0.6", "--quality-buckets", "4"]
    selected, direct = root / "ranked-selected", root / "ranked-direct"
    curator("select", "--select-from", str(tagged), "--output-dir", str(selected), "--where", "would_drop IS NULL",
            "--quality-column", "q", *ranking, *SMALL)
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(direct), *RULES, "--quality-model",
            f"q={model}", *ranking, *SMALL)
    chosen = {row["id"]: (row["q_bucket"], row["quality_bucket"]) for row in rows_of(selected)}
    kept = {row["id"]: (row["q_bucket"], row["quality_bucket"]) for row in rows_of(direct)}
    assert chosen == kept and 0 < len(kept) < len(rows_of(root / "selected-as the rules decided"))
    assert len({bucket for bucket, _ in kept.values()}) >= 2
    refused = curator("select", "--select-from", str(tagged), "--output-dir", str(root / "no"), "--quality-column",
                      "q", *SMALL, check=False)
    assert refused.returncode == 2 and "it is for --keep-top-fraction and --quality-buckets" in refused.stderr


def test_a_selection_takes_the_output_options(world):
    """Parquet, token files and statistics from a selection: what it keeps, tokenized once each."""
    import json

    from tests.support.tokenizer import train_tokenizer

    root, _, tagged = world
    tokenizer = train_tokenizer([row["text"] for row in rows_of(tagged)][:300], root / "tokenizer.json", 600)
    out = root / "selected-tokens"
    curator("select", "--select-from", str(tagged), "--output-dir", str(out), "--where", "would_drop IS NULL",
            "--output-file-type", "parquet", "--tokenize", str(tokenizer), "--stats", *SMALL)
    chosen = rows_of(out)
    assert chosen and all(row["would_drop"] is None for row in chosen)
    assert json.loads((out / "tokens" / "manifest.json").read_text())["documents"] == len(chosen)
    assert json.loads((out / "stats.json").read_text())["groups"]["all"]["documents"] == len(chosen)

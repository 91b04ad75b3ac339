"""Selection by model through `curator-array run`, on real text and fastText models trained
here: the scores against fastText's own `predict`, the run-wide top fraction against an
exact sort of every score, Nemotron-CC-style buckets (by documents, and by tokens with
`--tokenize`, written under bucket=KK/) and their ensembles (max, mean) against the same
rule in plain Python, thresholds, and the refusals of bad input."""

from __future__ import annotations

import json
import math
import random
import re
import shutil
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from curator_array.classify.model import WORKER_BYTES
from curator_array.classify.training import Hyperparameters, model_bytes
from curator_array.execution.ray_cluster import RAY_OWN_BYTES
from tests.conftest import curator_cli, need
from tests.conftest import curator_here as curator
from tests.support.quality_corpus import (
    official_scores,
    paragraphs,
    train_model,
    trainer_installed,
    write_jsonl,
)
from tests.support.tokenizer import train_tokenizer

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
FORWARDED_BY_RAY = re.compile(r"^(?:\x1b\[[0-9;]*m)?\([^)]*\)")  # "(pid=gcs_server) ...", coloured or not
MiB, GiB = 2**20, 2**30
SMALL = ["--num-cpus", "2", "--object-store-memory", str(100 * MiB), "--no-progress"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three input files of real paragraphs in ten languages, and a model trained on them."""
    need(trainer_installed(), "the fastText trainer is not installed (make install does it)")
    root = tmp_path_factory.mktemp("quality")
    documents = paragraphs()
    for part in range(3):
        write_jsonl(root / "in" / f"part-{part}.jsonl", documents[part::3])
    return root, train_model(root / "model"), {d["id"]: d for d in documents}


@pytest.fixture(scope="module")
def second_model(corpus, tmp_path_factory):
    """A model whose quality class is GNOME's manuals: its scores disagree with the first's."""
    return train_model(tmp_path_factory.mktemp("gnome"), positive_source="gnome-user-docs")


def records(directory: Path) -> list[dict]:
    """Every record of the visible files under ``directory`` (hidden dirs left out)."""
    return [json.loads(line) for path in sorted(directory.rglob("*.jsonl"))
            if not any(p.startswith(".") for p in path.relative_to(directory).parts)
            for line in path.read_text(encoding="utf-8").splitlines()]


def status_of(out: Path) -> dict[str, dict]:
    report = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    return {phase["phase"]: phase for phase in report["phases"]}


@pytest.fixture(scope="module")
def top_tenth(corpus, second_model, tmp_path_factory):
    root, model, _ = corpus
    out = tmp_path_factory.mktemp("top") / "out"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), *SMALL, "--quality-model",
            f"hq={model}", "--quality-model", f"gn={second_model}", "--keep-top-fraction", "hq=0.1",
            "--quality-buckets", "5", "--keep-removed")
    return out


def plain_buckets(scores: list[float], buckets: int) -> list[int]:
    """The run-wide bucket rule, written out in plain Python: scores in bins of 2**-24; the
    edge of bucket k is the first bin whose documents below come closest to k/N of them all;
    a document's bucket is how many edges its bin is at or above."""
    bins = [min(max(math.floor(score * 2**24), 0), 2**24) for score in scores]
    per_bin = Counter(bins)
    below, seen = {}, 0
    for found in sorted(per_bin):
        below[found], seen = seen, seen + per_bin[found]
    edges = [min(sorted(per_bin), key=lambda b: abs(below[b] - seen * k / buckets)) for k in range(1, buckets)]
    return [sum(edge <= found for edge in edges) for found in bins]


PLAIN_ENSEMBLES = {"max": max, "mean": lambda buckets: math.floor(Fraction(sum(buckets), len(buckets)) + Fraction(1, 2))}


def assert_ensemble_as_plain_python(documents: list[dict], names: tuple[str, ...], buckets: int, ensemble: str):
    per_model = {name: plain_buckets([d[name] for d in documents], buckets) for name in names}
    for name in names:
        assert [d[f"{name}_bucket"] for d in documents] == per_model[name], f"{name}_bucket"
    expected = [PLAIN_ENSEMBLES[ensemble]([per_model[name][i] for name in names]) for i in range(len(documents))]
    assert [d["quality_bucket"] for d in documents] == expected, f"quality_bucket ({ensemble})"
    other = "mean" if ensemble == "max" else "max"
    differs = sum(PLAIN_ENSEMBLES[other]([per_model[n][i] for n in names]) != e for i, e in enumerate(expected))
    assert differs > len(documents) / 20, f"the models disagree enough that {ensemble} and {other} differ"


def test_scores_equal_fasttexts_own_predict(corpus, top_tenth):
    _, model, documents = corpus
    scored = records(top_tenth) + records(top_tenth / ".removed" / "quality")
    assert len(scored) == len(documents), "every document is scored once: kept, or removed with its score"
    official = official_scores(model, [documents[r["id"]]["text"] for r in scored])
    assert np.max(np.abs(np.array([r["hq"] for r in scored]) - official)) < 1e-6


def test_the_top_tenth_of_the_whole_run_is_kept_as_an_exact_sort_keeps_it(corpus, top_tenth):
    kept = records(top_tenth)
    removed = records(top_tenth / ".removed" / "quality")
    every = np.array([r["hq"] for r in kept + removed])
    assert abs(len(kept) / len(every) - 0.1) * 100 < 0.1
    cut = json.loads((top_tenth / ".nemo_curator_metadata" / ".phases" / "quality_cut" / "data" / "cut.json")
                     .read_text())["models"]["hq"]
    assert min(r["hq"] for r in kept) >= cut["threshold"] > max(r["hq"] for r in removed)
    exact = set(np.argsort(-every, kind="stable")[:len(kept)].tolist())
    assert exact == set(range(len(kept))), "the kept documents are the highest scores of the run, whatever the shard"
    phases = status_of(top_tenth)
    assert phases["quality_cut"]["counts"]["thresholds"] == {"hq": cut["threshold"]}
    assert phases["quality_cut"]["counts"]["rank_errors"] == {"hq": cut["rank_error_pp"]}
    assert phases["quality_selection"]["counts"]["removed"] == len(removed)
    shown = curator("status", "--checkpoint-path", str(top_tenth)).stdout
    assert f"Run-wide thresholds (--keep-top-fraction): hq {cut['threshold']:.6g}" in shown
    assert "Kept fraction minus the fraction asked (percentage points): hq" in shown
    curator("report", "--checkpoint-path", str(top_tenth), "-o", str(top_tenth.parent / "report.html"))
    page = (top_tenth.parent / "report.html").read_text()
    assert "Run-wide thresholds (--keep-top-fraction)" in page and f"<td>{cut['threshold']:.6g}</td>" in page


def test_buckets_are_run_wide_percentiles_and_the_best_is_their_maximum(top_tenth):
    documents = records(top_tenth) + records(top_tenth / ".removed" / "quality")
    buckets = np.bincount([d["hq_bucket"] for d in documents], minlength=5)
    assert np.all(np.abs(buckets - len(documents) / 5) <= 2), buckets
    by_score = sorted(documents, key=lambda d: d["hq"])
    assert [d["hq_bucket"] for d in by_score] == sorted(d["hq_bucket"] for d in by_score), "higher scores, higher buckets"
    assert_ensemble_as_plain_python(documents, ("hq", "gn"), 5, "max")


def test_the_mean_ensemble_is_the_models_buckets_mean_rounded_half_up(corpus, second_model, tmp_path):
    root, model, documents = corpus
    out = tmp_path / "out"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), *SMALL, "--quality-model",
            f"hq={model}", "--quality-model", f"gn={second_model}", "--quality-buckets", "6",
            "--quality-ensemble", "mean")
    written = records(out)
    assert len(written) == len(documents)
    assert_ensemble_as_plain_python(written, ("hq", "gn"), 6, "mean")
    run = json.loads((out / ".nemo_curator_metadata" / ".slurm_array_completion" / "run.json").read_text())
    assert '"ensemble": "mean"' in json.dumps(run), "the ensemble is pinned with the run"


@pytest.mark.parametrize(("bound", "keeps"), [("hq=0.5", lambda s: s >= 0.5), ("hq<=0.5", lambda s: s <= 0.5)],
                         ids=["at-least", "at-most"])
def test_a_threshold_drops_and_counts_in_the_first_phase(corpus, tmp_path, bound, keeps):
    root, model, documents = corpus
    out = tmp_path / "out"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), *SMALL, "--quality-model",
            f"hq={model}", "--quality-threshold", bound, "--keep-removed")
    kept = records(out)
    removed = [json.loads(line) for path in (out / ".removed").rglob("*.jsonl")
               for line in path.read_text(encoding="utf-8").splitlines()]
    assert kept and removed and all(keeps(r["hq"]) for r in kept) and not any(keeps(r["hq"]) for r in removed)
    assert len(kept) + len(removed) == len(documents)
    manifests = (out / ".nemo_curator_metadata" / ".slurm_array_completion").glob("completed_*.json")
    dropped = json.loads(next(manifests).read_text())
    assert json.dumps(dropped).count(f'"quality_model.hq": {len(removed)}') == 1, "counted per model"
    assert not (out / ".nemo_curator_metadata" / ".phases").exists(), "a threshold alone adds no phase"


def test_buckets_by_tokens_are_written_under_their_directories_and_tokenized(corpus, tmp_path):
    root, model, documents = corpus
    tokenizer = train_tokenizer([d["text"] for d in list(documents.values())[:2000]], tmp_path / "tok.json", 2000)
    out = tmp_path / "out"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), *SMALL, "--quality-model",
            f"hq={model}", "--quality-buckets", "4", "--partition-by-bucket", "--tokenize", str(tokenizer))
    directories = sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert directories == ["bucket=00", "bucket=01", "bucket=02", "bucket=03", "tokens"]
    written = [(bucket, json.loads(line)) for bucket in directories[:4]
               for path in sorted((out / bucket).glob("*.jsonl")) for line in path.read_text().splitlines()]
    assert len(written) == len(documents) and all(int(b[-2:]) == r["quality_bucket"] for b, r in written)
    tokens = np.bincount([r["quality_bucket"] for _, r in written], weights=[r["token_count"] for _, r in written])
    assert np.all(np.abs(tokens / tokens.sum() - 0.25) < 0.02), "each bucket holds a quarter of the tokens"
    counts = np.bincount([r["quality_bucket"] for _, r in written])
    assert counts.max() / counts.min() > 1.2, "weighted by tokens, not by documents"
    manifest = json.loads((out / "tokens" / "manifest.json").read_text())
    assert sum(f["documents"] for f in manifest["files"]) == len(documents), "tokenize read the bucket directories"


def test_bad_input_is_refused_with_one_line(corpus, tmp_path):
    root, model, _ = corpus
    base = ["run", "--input-dir", str(root / "in"), "--output-dir", str(tmp_path / "out"), *SMALL]
    done = curator(*base, "--quality-model", f"hq={model}", "--quality-label", "__label__good", check=False)
    assert done.returncode == 2 and "its labels are __label__cc, __label__hq, not __label__good" in done.stderr
    done = curator(*base, "--quality-model", f"hq={model}", "--keep-top-fraction", "hq=1.5", check=False)
    assert done.returncode == 2 and "must be at most 1" in done.stderr
    done = curator(*base, "--quality-model", f"hq={tmp_path / 'none.bin'}", check=False)
    assert done.returncode == 2 and "none.bin is not a file" in done.stderr
    (tmp_path / "text.bin").write_text("not a model")
    done = curator(*base, "--quality-model", f"hq={tmp_path / 'text.bin'}", check=False)
    assert done.returncode == 2 and "text.bin is not a fastText model" in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), "refused before writing"


def test_a_node_runs_no_more_scoring_actors_than_its_memory_holds_and_refuses_one_it_cannot(corpus, tmp_path):
    """The job's memory (SLURM_MEM_PER_NODE), less the object store and Ray's own, holds 1.5
    actors: one runs on the 2 CPUs; with half an actor's worth, the run is refused."""
    root, model, documents = corpus
    per_actor = WORKER_BYTES + model.stat().st_size
    base = ["run", "--input-dir", str(root / "in"), *SMALL, "--quality-model", f"hq={model}"]
    one = (100 * MiB + RAY_OWN_BYTES + per_actor * 3 // 2) // MiB
    # The job's memory sizes the cluster a run starts: these two start their own.
    done = curator_cli(*base, "--output-dir", str(tmp_path / "one"), env={"SLURM_MEM_PER_NODE": str(one)})
    assert "actor pool of 1..1 (autoscaling up to the nodes' memory" in done.stderr
    assert len(records(tmp_path / "one")) == len(documents)
    none = (100 * MiB + RAY_OWN_BYTES + per_actor // 2) // MiB
    done = curator_cli(*base, "--output-dir", str(tmp_path / "none"), env={"SLURM_MEM_PER_NODE": str(none)},
                       check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"needs {per_actor / GiB:.2f} GiB" in done.stderr and "--mem" in done.stderr


def test_an_input_with_the_score_field_fails_naming_it(corpus, tmp_path):
    root, model, _ = corpus
    inputs = tmp_path / "in"
    write_jsonl(inputs / "a.jsonl", [{"id": "1", "text": "words and more words", "hq": 0.9}])
    done = curator("run", "--input-dir", str(inputs), "--output-dir", str(tmp_path / "out"), *SMALL,
                   "--quality-model", f"hq={model}", check=False)
    assert done.returncode != 0 and "already has a field 'hq'" in done.stderr


def test_a_model_changed_after_the_run_began_is_refused_by_its_digest(corpus, tmp_path):
    root, model, _ = corpus
    mine = tmp_path / "hq.bin"
    shutil.copy(model, mine)
    args = ["run", "--input-dir", str(root / "in"), "--output-dir", str(tmp_path / "out"), *SMALL, "--quality-model",
            f"hq={mine}", "--keep-top-fraction", "hq=0.5"]
    shard = {"NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "2"}
    curator(*args, env={**shard, "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "0"})
    with open(mine, "r+b") as handle:  # the same model, one weight changed
        handle.seek(-8, 2)
        handle.write(b"\x00\x00\x80\x3f\x00\x00\x80\x3f")
    done = curator(*args, env={**shard, "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "1"}, check=False)
    assert done.returncode == 2 and "quality_model" in done.stderr and "digests" in done.stderr, done.stderr[-2000:]


def test_train_classifier_writes_a_model_the_run_reads(corpus, tmp_path):
    root, _, documents = corpus
    positive, negative = tmp_path / "positive.jsonl", tmp_path / "negative.jsonl"
    for part in (positive, negative):  # a few hundred documents: quantizing takes seconds per 10,000 words
        part.write_text("".join((root / "model" / part.name).read_text().splitlines(keepends=True)[:200]))
    done = curator("train-classifier", "--positive", str(positive), "--negative", str(negative), "-o",
                   str(tmp_path / "small.ftz"), "--bucket", "10000", "--dim", "16", "--quantize")
    held = min(sum(1 for _ in open(positive)), sum(1 for _ in open(negative))) * 2 * 5 // 100
    assert f"held out {held} documents: precision" in done.stdout and "recall" in done.stdout
    assert (tmp_path / "small.ftz").stat().st_size < 2 * 2**20, "quantized: small"
    out = tmp_path / "out"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), *SMALL, "--quality-model",
            f"small={tmp_path / 'small.ftz'}")
    assert len(records(out)) == len(documents) and all(0 <= r["small"] <= 1 for r in records(out))
    done = curator("train-classifier", "--positive", str(tmp_path / "none.jsonl"), "--negative", str(negative), "-o",
                   str(tmp_path / "x.bin"), check=False)
    assert done.returncode == 2 and "none.jsonl" in done.stderr


def test_train_classifier_warns_of_a_useless_model_and_names_a_large_files_size_first(corpus, tmp_path):
    """Two classes from one distribution cannot be told apart: the held-out figures say so in
    one line with what to try; a full model over 100 MiB is announced before it is written."""
    root, _, _ = corpus
    lines = (root / "model" / "positive.jsonl").read_text().splitlines()
    lines += (root / "model" / "negative.jsonl").read_text().splitlines()
    random.Random(5).shuffle(lines)
    (tmp_path / "a.jsonl").write_text("\n".join(lines[::2]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[1::2]) + "\n")
    output = tmp_path / "coin.bin"
    done = curator("train-classifier", "--positive", str(tmp_path / "a.jsonl"), "--negative", str(tmp_path / "b.jsonl"),
                   "-o", str(output), "--bucket", "270000", "--dim", "100")
    # A line Ray forwards from the module's shared cluster (an earlier test's unplaceable actor,
    # logged late by the GCS) is not this command's: a run of its own has a cluster of its own.
    said = [line for line in done.stderr.strip().splitlines() if not FORWARDED_BY_RAY.match(line)]
    assert len(said) == 2, said
    expected = model_bytes(Hyperparameters(dim=100, bucket=270000), 0) / 2**20
    assert said[0].startswith("the model will take about ") and "--quantize" in said[0]
    assert abs(float(said[0].split("about ")[1].split(" MiB")[0].replace(",", "")) - output.stat().st_size / 2**20) < 0.05 * expected
    assert said[1].startswith("warning: held-out precision") and "below 0.8" in said[1] and "--epoch 25" in said[1]
    texts = [json.loads(line)["text"] for line in lines]
    write_jsonl(tmp_path / "real.jsonl", [{"text": t} for t in texts])
    write_jsonl(tmp_path / "mirrored.jsonl", [{"text": " ".join(w[::-1] for w in t.split())} for t in texts])
    good = curator("train-classifier", "--positive", str(tmp_path / "real.jsonl"), "--negative",
                   str(tmp_path / "mirrored.jsonl"), "-o", str(tmp_path / "good.bin"), "--bucket", "10000",
                   "--dim", "16")
    assert "warning" not in good.stderr and "will take" not in good.stderr, good.stderr


def test_label_models_write_the_best_labels_as_fasttext_predicts_them(corpus, tmp_path):
    """The bundled language identifier is a real model of 176 labels: each document gets its
    best label and probability, and the three best, as fastText's own predict gives them."""
    import fasttext

    from curator_array.classify.model import model_text
    from curator_array.stages.web.fasttext_language import bundled_model

    root, quality, documents = corpus
    out = tmp_path / "out"
    curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), *SMALL, "--quality-model",
            f"hq={quality}", "--quality-threshold", "hq=0.2", "--label-model", f"lang={bundled_model()}",
            "--label-top-k", "3")
    written = records(out)
    assert written and len(written) < len(documents), "labelled after the threshold dropped some"
    lid = fasttext.load_model(str(bundled_model()))
    for record in written:
        labels, probabilities = lid.predict(model_text(documents[record["id"]]["text"]), k=3, threshold=-1.0)
        assert record["lang_labels"] == [label.removeprefix("__label__") for label in labels]
        assert record["lang"] == record["lang_labels"][0] and record["lang_prob"] == record["lang_probs"][0]
        assert np.allclose(record["lang_probs"], probabilities, atol=1e-6)
    assert len({r["lang"] for r in written}) >= 5, "the corpus's languages, as labels"
    done = curator("run", "--input-dir", str(root / "in"), "--output-dir", str(tmp_path / "again"), *SMALL,
                   "--label-model", f"hq={quality}", "--label-top-k", "3", check=False)
    assert done.returncode == 2 and "--label-top-k 3: --label-model hq=" in done.stderr and "has 2 labels" in done.stderr


def test_a_model_that_scored_long_enough_moves_onto_huge_pages_and_scores_the_same(corpus, monkeypatch):
    from curator_array.classify import model as quality
    from curator_array.classify import model_pages

    root, model_path, documents = corpus
    texts = [document["text"] for document in documents.values()][:300]
    regions = model_pages.LargeRegions()
    monkeypatch.setattr(quality, "MODELS", regions)
    monkeypatch.setattr(model_pages, "LARGE", 1 * MiB)  # the test's model is small
    model = quality.load_model(model_path)
    assert regions.waiting, "the load's matrix is waiting to move"
    huge_before = _anonymous_huge_kib()
    on_small_pages = quality.quality_probabilities(model, texts)
    monkeypatch.setattr(model_pages, "MOVE_AFTER_S", 0.0)
    moved = quality.quality_probabilities(model, texts)
    assert not regions.waiting
    need(_anonymous_huge_kib() > huge_before, "this kernel cannot collapse memory onto huge pages (MADV_COLLAPSE)")
    assert moved == on_small_pages == quality.quality_probabilities(model, texts)


def _anonymous_huge_kib() -> int:
    return int(Path("/proc/self/smaps_rollup").read_text().split("AnonHugePages:")[1].split()[0])

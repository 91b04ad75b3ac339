"""Token output a training run can mix (#68, items 1 and 2): one token-file set per value of the
partition fields, every document in its set exactly once as its tokens and the end-of-text
token, shuffled across the whole run by a seed so that one shard and three shards write the
same bytes; a run pinned before the shuffle existed keeps its order; too many sets fail in one
line."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from curator_array.tokens.files import TOKEN_FORMATS
from tests.conftest import curator_here as curator
from tests.integration.test_tokenize import run
from tests.support.quality_corpus import paragraphs, write_jsonl
from tests.support.tokenizer import END_OF_TEXT, train_tokenizer

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SETS = ["--token-partition-by", "language,tier", "--token-shuffle-seed", "11"]


def set_documents(out: Path) -> dict[str, list[list[int]]]:
    manifest = json.loads((out / "tokens" / "manifest.json").read_text())
    fmt = TOKEN_FORMATS[manifest["format"]]
    found: dict[str, list[list[int]]] = {}
    for item in manifest.get("sets", [{"name": "", "files": manifest["files"]}]):
        for part in item["files"]:
            lengths, ids = fmt.read(out / "tokens" / part["name"])
            starts = np.concatenate([[0], np.cumsum(lengths)])
            found.setdefault(item["name"], []).extend(ids[starts[i]:starts[i + 1]].tolist() for i in range(len(lengths)))
    return found


def token_bytes(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out / "tokens")): p.read_bytes() for p in (out / "tokens").rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("token-sets")
    documents = [d for d in paragraphs()[::9] if d["language"] in ("de", "fr", "ja")][:420]
    for n, document in enumerate(documents):
        document["tier"] = ("high", "low", "a/b")[n % 3] if n % 10 else None  # a value with a slash; some without
    for part in range(6):
        write_jsonl(root / "in" / f"part-{part}.jsonl", documents[part::6])
    tokenizer = train_tokenizer([d["text"] for d in documents], root / "tokenizer.json", vocab_size=800)
    return root, documents, tokenizer


@pytest.fixture(scope="module")
def one_and_three(corpus):
    root, _, tokenizer = corpus
    outs = root / "one", root / "three"
    for out, shards in zip(outs, (1, 3)):
        run(root / "in", out, "--tokenize", str(tokenizer), "--token-file-size", "6K", *SETS, shards=shards)
    return outs


def test_each_set_holds_its_documents_once_each_shuffled(corpus, one_and_three):
    from tokenizers import Tokenizer

    _, documents, path = corpus
    tokenizer = Tokenizer.from_file(str(path))
    eos = tokenizer.token_to_id(END_OF_TEXT)
    found = set_documents(one_and_three[0])
    wanted: dict[str, list[list[int]]] = {}
    for document in documents:
        tier = "a%2Fb" if document["tier"] == "a/b" else document["tier"] or "__missing__"
        wanted.setdefault(f"language={document['language']}/tier={tier}", []).append(
            tokenizer.encode(document["text"]).ids + [eos])
    assert set(found) == set(wanted) and len(found) == 12
    for name, docs in wanted.items():
        assert Counter(map(tuple, found[name])) == Counter(map(tuple, docs)), f"{name}: each document once"
    in_input_order = sum(found[name] == docs for name, docs in wanted.items() if len(docs) > 5)
    assert in_input_order == 0, "shuffled within every set"
    manifest = json.loads((one_and_three[0] / "tokens" / "manifest.json").read_text())
    assert manifest["partition_by"] == ["language", "tier"] and manifest["shuffle_seed"] == 11
    assert {item["name"]: item["documents"] for item in manifest["sets"]} == {k: len(v) for k, v in wanted.items()}
    assert all((one_and_three[0] / "tokens" / item["name"]).is_dir() for item in manifest["sets"])


def test_one_shard_and_three_write_the_same_bytes(one_and_three):
    one, three = one_and_three
    assert token_bytes(one) == token_bytes(three)


def test_datatroves_format_gets_the_same_sets_in_the_same_order(corpus, one_and_three, tmp_path):
    root, _, tokenizer = corpus
    out = tmp_path / "datatrove"
    run(root / "in", out, "--tokenize", str(tokenizer), "--token-file-size", "6K", *SETS, "--token-format", "datatrove")
    assert set_documents(out) == set_documents(one_and_three[0])
    assert all(p.suffix in (".ds", ".index", ".json") for p in (out / "tokens").rglob("*") if p.is_file())


def test_another_seed_another_order_and_no_shuffle_the_runs_order(corpus, one_and_three, tmp_path):
    root, _, tokenizer = corpus
    other, plain = tmp_path / "other", tmp_path / "plain"
    run(root / "in", other, "--tokenize", str(tokenizer), "--token-file-size", "6K", *SETS[:-1], "12")
    run(root / "in", plain, "--tokenize", str(tokenizer), "--token-file-size", "6K", *SETS[:2], "--no-token-shuffle")
    first, second, unshuffled = set_documents(one_and_three[0]), set_documents(other), set_documents(plain)
    assert {k: sorted(v) for k, v in first.items()} == {k: sorted(v) for k, v in second.items()}
    assert any(first[name] != second[name] for name in first)
    assert not (plain / "tokens" / "manifest.json").read_text().count("shuffle_seed")
    assert {k: sorted(v) for k, v in unshuffled.items()} == {k: sorted(v) for k, v in first.items()}


def test_too_many_sets_fail_the_phase_in_one_line(corpus, tmp_path):
    root, _, tokenizer = corpus
    done = run(root / "in", tmp_path / "out", "--tokenize", str(tokenizer), "--token-partition-by", "id",
               "--token-max-sets", "5", check=False)
    assert done.returncode != 0
    assert "--token-partition-by id: more than 5 token-file sets (--token-max-sets)" in done.stderr


def test_a_mixture_is_written_as_megatron_reads_it(corpus, one_and_three, tmp_path):
    """blend.json and the data args: each set's weight is its share (epochs 3 for German high
    tier, 0 for every Japanese set, the rest one each), split among its files by tokens."""
    root, _, tokenizer = corpus
    held = {item["name"]: item["tokens"] for item in
            json.loads((one_and_three[0] / "tokens" / "manifest.json").read_text())["sets"]}
    japanese = [name for name in held if name.startswith("language=ja/")]
    mix = tmp_path / "mix.toml"
    mix.write_text('max_epochs = 3\n[sets."language=de/tier=high"]\nepochs = 3\n'
                   + "".join(f'[sets."{name}"]\nepochs = 0\n' for name in japanese))
    out = tmp_path / "mixed"
    run(root / "in", out, "--tokenize", str(tokenizer), "--token-file-size", "6K", *SETS, "--mix", str(mix))
    drawn = {name: tokens * (3 if name == "language=de/tier=high" else 0 if name in japanese else 1)
             for name, tokens in held.items()}
    blend = json.loads((out / "tokens" / "blend.json").read_text())
    shares = {item["name"]: item["share"] for item in blend["sets"]}
    assert shares == pytest.approx({name: d / sum(drawn.values()) for name, d in drawn.items()})
    assert {item["name"]: item["epochs"] for item in blend["sets"]}["language=de/tier=high"] == pytest.approx(3)
    args = (out / "tokens" / "data_args.txt").read_text().split()
    weights = dict(zip(args[1::2], map(float, args[0::2])))
    assert sum(weights.values()) == pytest.approx(1.0) and not any("language=ja" in p for p in weights)
    for item in blend["sets"]:
        assert sum(weights.get(p["prefix"], 0.0) for p in item["prefixes"]) == pytest.approx(item["share"])
    assert all((out / f"{prefix}.bin").is_file() for prefix in weights)
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    counts = {p["phase"]: p for p in status["phases"]}["tokens"]["counts"]
    assert counts["epochs_by_set"]["language=de/tier=high"] == pytest.approx(3, abs=1e-3)
    curator("report", "--checkpoint-path", str(out), "-o", str(tmp_path / "report.html"))
    page = (tmp_path / "report.html").read_text()
    chart = page[page.index('id="token-sets"'):]
    assert "<svg" in chart[:500] and all(item["name"] in chart for item in blend["sets"]), "a chart of the sets"
    drawn = megatron_draws(out, 100_000)
    for item in blend["sets"]:
        share = sum(drawn.get(p["prefix"], 0) for p in item["prefixes"]) / 100_000
        assert abs(share - item["share"]) < 0.01, f"{item['name']}: megatron-core draws {share:.4f}, asked {item['share']:.4f}"

    mix.write_text('max_epochs = 2\n[sets."language=de/tier=high"]\nepochs = 3\n')
    refused = run(root / "in", tmp_path / "too-many", "--tokenize", str(tokenizer), *SETS, "--mix", str(mix),
                  check=False)
    assert refused.returncode == 2
    assert "set 'language=de/tier=high' holds" in refused.stderr and "more than max_epochs 2" in refused.stderr


def megatron_draws(out: Path, samples: int) -> dict[str, int]:
    """How many of ``samples`` megatron-core's blended GPT dataset draws from each prefix."""
    import sys

    from tests.conftest import REPO, need
    from tests.support.reference_site import (
        ensure_reference_site,
        reference_environment,
        reference_output,
    )

    try:
        ensure_reference_site("megatron-site")
    except RuntimeError as problem:
        need(False, str(problem))
    printed = reference_output([sys.executable, "-m", "tests.support.megatron_blend", ".", str(samples)],
                               reference_environment("megatron-site"), cwd=out,
                               reads=(out / "tokens", REPO / "tests" / "support" / "megatron_blend.py"))
    return json.loads(printed.strip().splitlines()[-1])


def test_rehydration_repeats_each_kept_document_by_its_clusters_size(tmp_path):
    """--dedup exact on the planted corpus (copies of every kind), then --rehydrate: each kept
    document is in the token files its range's copies times, counted by range; refused
    without --dedup."""
    from tokenizers import Tokenizer

    from tests.integration.test_tokenize import documents_in_order
    from tests.support.planted import write_corpus

    inputs = tmp_path / "in"
    write_corpus(inputs, files=4)
    texts = [json.loads(line)["text"] for path in sorted(inputs.iterdir()) for line in path.read_text().splitlines()]
    path = train_tokenizer(texts, tmp_path / "tokenizer.json", vocab_size=1500)
    out = tmp_path / "out"
    run(inputs, out, "--dedup", "exact", "--tokenize", str(path), "--rehydrate", "1:1,2-1000:3", shards=2)
    tokenizer = Tokenizer.from_file(str(path))
    eos = tokenizer.token_to_id(END_OF_TEXT)
    kept = [doc for doc in documents_in_order(out) if doc["text"]]
    wanted = Counter()
    for doc in kept:
        wanted[tuple(tokenizer.encode(doc["text"]).ids + [eos])] += 1 if doc["minhash_cluster_size"] == 1 else 3
    written = set_documents(out)[""]
    found = Counter(map(tuple, written))
    assert found == wanted
    assert all(one != two for one, two in zip(written, written[1:])), "no two copies side by side"
    assert set(wanted.values()) == {1, 3}, "kept documents with and without copies"
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    by_range = {p["phase"]: p for p in status["phases"]}["tokenize"]["counts"]["documents_by_copies"]
    sizes = Counter(doc["minhash_cluster_size"] for doc in kept)
    assert by_range == {"1:1": sizes[1], "2-1000:3": sum(v for k, v in sizes.items() if k >= 2)}
    refused = run(inputs, tmp_path / "plain", "--tokenize", str(path), "--rehydrate", "1:1", check=False)
    assert refused.returncode == 2 and "only a run deduplicated by document has: give --dedup" in refused.stderr

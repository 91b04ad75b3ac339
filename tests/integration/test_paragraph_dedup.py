"""Dedup below the document (#69): ``--dedup paragraphs`` decides as DCLM's BFF ``old-both``
does over the whole run in its own order, whatever the sharding; it composes with the
document dedup; its figures show in ``status``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from curator_array.core.records.shard import shard_output_files
from tests.conftest import curator_here as curator
from tests.integration.test_tokenize import run
from tests.support.planted_paragraphs import planted_documents, reference_old_both

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]


def output_documents(out: Path) -> dict[str, str]:
    return {doc["id"]: doc["text"] for path in sorted(out.glob("*.jsonl"))
            for doc in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def curated_in_run_order(out: Path, shards: int) -> list[dict]:
    """The curated documents in the run's order: curated files sorted by path, rows in order."""
    layout = CheckpointLayout(out)
    names = sorted(name for shard in range(shards) for name in shard_output_files(layout, shard))
    staged = out / ".curated"
    return [json.loads(line) for name in names for line in (staged / name).read_text(encoding="utf-8").splitlines()]


def kept_flags(text: str, kept: str) -> list[bool]:
    """Which of ``text``'s paragraphs (BFF's cut) the kept text holds, aligned in order."""
    parts = text.split("\n")
    parts = parts[:1] + ["\n" + part for part in parts[1:]]
    flags, rest = [], kept
    for part in parts:
        holds = rest.startswith(part) and bool(part or not rest)
        flags.append(holds)
        rest = rest[len(part):] if holds else rest
    return flags


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("paragraphs")
    documents = planted_documents(600)
    for part in range(6):
        (root / "in").mkdir(exist_ok=True)
        (root / "in" / f"part-{part}.jsonl").write_text(
            "".join(json.dumps({"id": f"d{i:04d}", "text": documents[i]}, ensure_ascii=False) + "\n"
                    for i in range(part, len(documents), 6)), encoding="utf-8")
    outs = {shards: root / f"out-{shards}" for shards in (1, 3)}
    for shards, out in outs.items():
        audit = ["--dedup-keep-removed"] if shards == 3 else []
        run(root / "in", out, "--dedup", "paragraphs", "--dedup-buckets", "2", *audit, shards=shards)
    return root, outs


def test_decisions_agree_with_a_sequential_old_both(runs):
    _, outs = runs
    curated = curated_in_run_order(outs[3], 3)
    reference = reference_old_both([doc["text"] for doc in curated])
    ours = output_documents(outs[3])
    paragraphs = paragraphs_equal = documents_equal = 0
    for doc, (removed, emptied, text) in zip(curated, reference):
        kept = ours.get(doc["id"])
        documents_equal += (kept is None) == (emptied or not text.strip()) and (kept is None or kept == text)
        flags = kept_flags(doc["text"], kept) if kept is not None else [False] * len(removed)
        paragraphs += len(removed)
        paragraphs_equal += sum(mine != gone for mine, gone in zip(flags, removed)) if kept is not None else \
            sum(removed) + (len(removed) - sum(removed)) * emptied
    assert sum(sum(r) for r, _, _ in reference) > 0.2 * paragraphs, "the corpus has paragraphs to remove"
    assert paragraphs_equal / paragraphs >= 0.99, f"{paragraphs_equal}/{paragraphs} paragraph decisions equal"
    assert documents_equal / len(curated) >= 0.99, f"{documents_equal}/{len(curated)} documents equal"
    print(f"old-both agreement: paragraphs {paragraphs_equal}/{paragraphs}, documents {documents_equal}/{len(curated)}")


def test_one_shard_and_three_write_the_same_documents(runs):
    _, outs = runs
    assert output_documents(outs[1]) == output_documents(outs[3])


def test_the_documents_that_lost_paragraphs_are_kept_aside_with_the_spans_cut(runs):
    _, outs = runs
    kept = output_documents(outs[3])
    aside = [doc for path in sorted((outs[3] / ".removed" / "paragraphs").glob("*.jsonl"))
             for doc in map(json.loads, path.read_text(encoding="utf-8").splitlines())]
    originals = {doc["id"]: doc["text"] for doc in curated_in_run_order(outs[3], 3)}
    assert aside and {doc["id"] for doc in aside} <= set(originals)
    for doc in aside:
        assert doc["text"] == originals[doc["id"]], "kept aside as it was"
        raw, rest, last = doc["text"].encode(), b"", 0
        for start, end in doc["bff_duplicate_spans"]:
            rest, last = rest + raw[last:start], end
        rest += raw[last:]
        assert doc["bff_document_emptied"] == (doc["id"] not in kept)
        if doc["id"] in kept:
            assert kept[doc["id"]] == rest.decode()
    untouched = set(originals) - {doc["id"] for doc in aside}
    assert all(kept[i] == originals[i] for i in untouched)


def test_status_counts_what_each_paragraph_phase_did(runs):
    _, outs = runs
    status = json.loads(curator("status", "--checkpoint-path", str(outs[3]), "--json").stdout)
    phases = {p["phase"]: p for p in status["phases"]}
    counts = phases["paragraph_removal"]["counts"]
    ngrams = phases["paragraph_ngrams"]["counts"]
    assert counts["paragraphs"] == ngrams["paragraphs"] and counts["rows_in"] == ngrams["documents"] == 600
    assert counts["rows_in"] - counts["rows_out"] == counts["documents_emptied"] > 0
    assert counts["paragraphs_removed"] > 0 and counts["paragraphs_too_short"] > 0 and counts["bytes_removed"] > 0
    assert sum(counts["removed_per_document"].values()) == 600
    assert len(output_documents(outs[3])) == counts["rows_out"]


def test_paragraphs_then_fuzzy_dedup_reads_what_the_paragraph_step_left(runs, tmp_path):
    root, outs = runs
    out = tmp_path / "both"
    run(root / "in", out, "--dedup", "fuzzy,paragraphs", "--dedup-buckets", "2", shards=2)
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    phases = {p["phase"]: p["counts"] for p in status["phases"]}
    order = list(phases)
    assert order[order.index("paragraph_ngrams"):][:4] == ["paragraph_ngrams", "paragraph_buckets", "paragraph_removal",
                                                          "signatures"]
    assert phases["signatures"]["documents"] == phases["paragraph_removal"]["rows_out"]
    after = output_documents(out)
    paragraphs_only = output_documents(outs[1])
    assert set(after) <= set(paragraphs_only) and all(after[i] == paragraphs_only[i] for i in after)
    assert len(after) == phases["removal"]["rows_out"] == phases["paragraph_removal"]["rows_out"] - \
        phases["removal"]["removed"]
    pinned = json.loads((CheckpointLayout(out).run_file).read_text())["pipeline"]["dedup"]
    assert pinned["mode"] == "fuzzy" and pinned["early"] == ["paragraphs"] and pinned["paragraph_ngram"] == 13


def test_two_whole_document_steps_are_refused_in_one_line(runs, tmp_path):
    root, _ = runs
    done = run(root / "in", tmp_path / "out", "--dedup", "exact,fuzzy", check=False)
    assert done.returncode == 2
    assert "--dedup exact,fuzzy: exact and fuzzy both remove whole documents; choose one" in done.stderr


def test_dclm_removes_repeated_paragraphs_before_its_classifier_decides(tmp_path):
    """``--pipeline dclm`` in DCLM-Baseline's order: the rules, the paragraph dedup (on unless
    ``--dedup none``), then the quality model with DCLM's threshold, in a phase after the dedup."""
    from tests.conftest import need
    from tests.integration.test_dclm_run import pages
    from tests.support.quality_corpus import train_model, trainer_installed, write_jsonl

    need(trainer_installed(), "the fastText trainer is not installed (make install does it)")
    documents = [d for d in pages() if isinstance(d["text"], str)]
    for part in range(2):
        write_jsonl(tmp_path / "in" / f"part-{part}.jsonl", documents[part::2])
    model = train_model(tmp_path / "model")
    recipe = ["--pipeline", "dclm", "--input-file-type", "jsonl", "--quality-model", f"hq={model}"]
    out, plain = tmp_path / "out", tmp_path / "plain"
    run(tmp_path / "in", out, *recipe, shards=2)
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    phases = {p["phase"]: p["counts"] for p in status["phases"]}
    assert list(phases)[-4:] == ["paragraph_ngrams", "paragraph_buckets", "paragraph_removal", "quality_after_dedup"]
    assert phases["paragraph_removal"]["paragraphs_removed"] > 0
    assert phases["quality_after_dedup"]["rows_in"] == phases["paragraph_removal"]["rows_out"]
    assert not any(step.startswith("quality_model") for step in status["dropped"]), "not scored in the first phase"
    pinned = json.loads(CheckpointLayout(out).run_file.read_text())["pipeline"]
    assert pinned["dedup"]["early"] == ["paragraphs"] and pinned["quality_model"]["after_dedup"] is True
    scored = parquet_rows(out)
    assert scored and all(row["hq"] >= 0.018112 for row in scored)
    assert len(scored) == phases["quality_after_dedup"]["rows_out"]

    run(tmp_path / "in", plain, *recipe, "--dedup", "none")
    status = json.loads(curator("status", "--checkpoint-path", str(plain), "--json").stdout)
    assert not status["phases"] or all(not p["phase"].startswith(("paragraph", "quality_after")) for p in status["phases"])
    assert "dedup" not in json.loads(CheckpointLayout(plain).run_file.read_text())["pipeline"]
    assert all(row["hq"] >= 0.018112 for row in parquet_rows(plain))


def parquet_rows(out: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return [row for path in sorted(out.glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def test_a_paragraph_setting_without_the_paragraph_step_is_refused(runs, tmp_path):
    root, _ = runs
    done = run(root / "in", tmp_path / "out", "--dedup", "exact", "--dedup-paragraph-threshold", "0.5", check=False)
    assert done.returncode == 2
    assert "--dedup-paragraph-threshold: it needs the paragraphs step (--dedup paragraphs,exact)" in done.stderr


def reference_lines(texts: list[str], min_chars: int = 1) -> list[str | None]:
    """Exact line dedup in one pass: each text without the lines whose normalised text an
    earlier line had (None: dropped, too little left)."""
    import pyarrow as pa

    from curator_array.dedup.words import simplify

    seen, decided = set(), []
    for text in texts:
        lines = text.split("\n")
        normal = simplify(pa.array(lines, pa.string())).to_pylist()
        kept, removed = [], False
        for number, (line, key) in enumerate(zip(lines, normal)):
            if key and key in seen:
                removed = True
                continue
            if key:
                seen.add(key)
            kept.append(line if number == 0 else "\n" + line)
        result = "".join(kept)
        decided.append(None if removed and len("".join(result.split())) < min_chars else result)
    return decided


def test_exact_lines_are_removed_as_one_pass_over_the_run_removes_them(runs, tmp_path):
    root, outs = runs
    out = tmp_path / "lines"
    run(root / "in", out, "--dedup", "lines", "--dedup-line-min-chars", "200", "--dedup-buckets", "2", shards=2)
    curated = curated_in_run_order(out, 2)
    wanted = dict(zip((doc["id"] for doc in curated), reference_lines([doc["text"] for doc in curated], 200)))
    assert output_documents(out) == {i: text for i, text in wanted.items() if text is not None}
    assert sum(text is None for text in wanted.values()) > 0 and sum(
        text is not None and text != doc["text"] for doc, text in zip(curated, wanted.values())) > 0
    counts = {p["phase"]: p["counts"] for p in json.loads(
        curator("status", "--checkpoint-path", str(out), "--json").stdout)["phases"]}["paragraph_removal"]
    assert counts["documents_emptied"] == sum(text is None for text in wanted.values())
    done = run(root / "in", tmp_path / "both", "--dedup", "lines,paragraphs", check=False)
    assert done.returncode == 2 and "lines and paragraphs both cut documents at newlines" in done.stderr

"""Decontamination through `curator-array run`: planted contamination dropped (or cut) and
accounted for in the manifest, `status` and the report; the index pinned, a changed eval
file and a damaged index refused; bad eval files refused before any work; and, in
datatrove's mode, the decisions of datatrove's own `NGramsDecontFilter`."""

from __future__ import annotations

import json
import subprocess
import sys
from hashlib import sha256
from pathlib import Path

import pytest

from tests.conftest import curator_here as curator
from tests.conftest import need
from tests.support.decont_corpus import NUMBERS_TASK, RAW_TASK, eval_and_corpus, expected_hits
from tests.support.quality_corpus import write_jsonl
from tests.support.reference_site import ensure_reference_site, reference_environment

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "2", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def write_inputs(root: Path, records: list[dict], corpus: list[dict]) -> tuple[Path, Path]:
    evals = write_jsonl(root / "evals" / "benchmarks.jsonl", records)
    for part in range(3):
        write_jsonl(root / "in" / f"part-{part}.jsonl", [{"id": d["id"], "text": d["text"]} for d in corpus[part::3]])
    return evals, root / "in"


def rows(directory: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines()]


def test_a_run_drops_what_leaked_and_says_where(tmp_path):
    records, corpus = eval_and_corpus()
    evals, inputs = write_inputs(tmp_path, records, corpus)
    out = tmp_path / "out"
    args = ["run", "--input-dir", str(inputs), "--output-dir", str(out), "--decontaminate", str(evals),
            "--keep-removed", *SMALL]
    curator(*args)
    expected = expected_hits(corpus, overlap=False)
    assert {d["id"] for d in rows(out)} == {key for key, task in expected.items() if task is None}
    removed = [d for d in rows(out / ".removed" / "pipeline") if d["removed_by"].startswith("decontaminate.")]
    assert {d["id"]: d["contaminated_task"] for d in removed} == {k: v for k, v in expected.items() if v}
    assert all(d["removed_by"] == f"decontaminate.{d['contaminated_task']}" and len(d["contaminated_ngram"].split())
               >= 8 for d in removed)

    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    per_task = {}
    for task in filter(None, expected.values()):
        per_task[task] = per_task.get(task, 0) + 1
    assert {name: figures[0] for name, figures in status["contamination"]["tasks"].items()} == per_task
    assert status["dropped"] == {f"decontaminate.{task}": count for task, count in per_task.items()}
    assert all(len(found) == 5 for found in status["contamination"]["examples"].values() if len(found) > 4)
    text = curator("status", "--checkpoint-path", str(out)).stdout
    assert f"manual_qa: {per_task['manual_qa']} documents" in text, text
    report = tmp_path / "report.html"
    curator("report", "--checkpoint-path", str(out), "--output", str(report))
    page = report.read_text()
    assert "Eval sets found in the run" in page and "benchmarks.jsonl:1" in page and RAW_TASK in page

    run = json.loads((out / ".nemo_curator_metadata" / ".slurm_array_completion" / "run.json").read_text())
    pinned = run["pipeline"]["decontaminate"]
    index = next((out / ".nemo_curator_metadata" / "pinned_files").glob("*-decont.index"))
    assert pinned["files"] == {"benchmarks.jsonl": sha256(evals.read_bytes()).hexdigest()}
    assert pinned["index_digest"] == sha256(index.read_bytes()).hexdigest()

    with evals.open("a") as more:
        more.write(json.dumps({"text": "one more answer that someone added to the file after the run began"}) + "\n")
    refused = curator(*args, check=False)
    assert refused.returncode == 2 and "decontaminate.files.benchmarks.jsonl: sha256" in refused.stderr, refused.stderr
    write_jsonl(evals, records)
    index.write_bytes(index.read_bytes()[:-9])
    refused = curator(*args, "--force", check=False)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"curator-array: error: decontamination index {index} is not the one the run pinned "
        f"(sha256 {sha256(index.read_bytes()).hexdigest()[:12]}, pinned "
        f"{pinned['index_digest'][:12]}): it is truncated or was replaced; delete it and {index.name}.json, and the "
        "next start builds it again from the pinned eval files"]


def test_cut_mode_cuts_each_hit_out_and_drops_what_is_left_too_short(tmp_path):
    records, corpus = eval_and_corpus(eval_records=20, clean=50)
    long_hosts = " ".join(d["text"] for d in corpus if d["planted"] is None)[:3000]
    for document in corpus:  # long enough on either side that a cut leaves two pieces to keep
        if document["planted"] == "verbatim":
            document["text"] = f"{long_hosts[:1500]}\n{document['text']}\n{long_hosts[1500:]}"
    evals, inputs = write_inputs(tmp_path, records, corpus)
    out = tmp_path / "out"
    curator("run", "--input-dir", str(inputs), "--output-dir", str(out), "--decontaminate", str(evals),
            "--decont-mode", "cut", *SMALL)
    kept = {d["id"]: d["text"] for d in rows(out)}
    answers = {r["text"] for r in records if r["task"] != NUMBERS_TASK and len(r["text"].split()) >= 8}
    planted = {d["id"]: d for d in corpus}
    for key, text in kept.items():
        assert not any(answer in text for answer in answers), f"{key} still holds an eval answer"
        if planted[key]["planted"] == "verbatim":
            assert text.count("\n\n") == 1 and len(text) < len(planted[key]["text"]) - 400
    hit = expected_hits(corpus, overlap=False)
    assert all(hit[key] for key in kept if kept[key] != planted[key]["text"]), "only documents with a hit change"
    assert all(key in kept for key, d in planted.items() if d["planted"] == "verbatim"), "the long ones keep pieces"
    status = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    cut_chars = sum(figures[2] for figures in status["contamination"]["tasks"].values())
    lost = sum(len(d["text"]) for d in corpus) - sum(len(text) for text in kept.values())
    assert 0 < cut_chars and abs(cut_chars - lost) <= 4 * len(corpus), "the characters cut are what the output lost"


def test_bad_eval_files_are_refused_before_any_work(tmp_path):
    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "a document"}])
    bad = tmp_path / "mmlu.jsonl"
    bad.write_text('{"text": "fine"}\n\n{"question": "q", "answer": "a"}\n')
    out = tmp_path / "out"
    done = curator("run", "--input-dir", str(tmp_path / "in"), "--output-dir", str(out), "--decontaminate", str(bad),
                   *SMALL, check=False)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"curator-array: error: --decontaminate {bad}: line 3: no 'text' field (the answer, gold or passage to "
        "look for)"], done.stderr
    assert not out.exists()
    done = curator("run", "--input-dir", str(tmp_path / "in"), "--output-dir", str(out), "--decont-ngrams", "12",
                   *SMALL, check=False)
    assert done.returncode == 2 and "--decont-ngrams 12: it needs --decontaminate" in done.stderr, done.stderr


def test_datatrove_mode_decides_as_datatrove(tmp_path):
    """``--decont-ngrams 12 --decont-overlap``: on English documents, datatrove's
    NGramsDecontFilter with its default config, fed the same eval records, drops the same
    documents for the same tasks."""
    try:
        ensure_reference_site()
    except RuntimeError as problem:
        need(False, str(problem))
    records, corpus = eval_and_corpus(eval_records=60, clean=150, straddle=12, hosts_language="en")
    evals, inputs = write_inputs(tmp_path, records, corpus)
    out, decisions = tmp_path / "out", tmp_path / "datatrove.json"
    curator("run", "--input-dir", str(inputs), "--output-dir", str(out), "--decontaminate", str(evals),
            "--decont-ngrams", "12", "--decont-overlap", "--keep-removed", *SMALL)
    write_jsonl(tmp_path / "all.jsonl", [{"id": d["id"], "text": d["text"]} for d in corpus])
    subprocess.run([sys.executable, "-m", "tests.support.datatrove_decont", str(evals), str(tmp_path / "all.jsonl"),
                    str(decisions)], check=True, env=reference_environment(), capture_output=True)
    theirs = json.loads(decisions.read_text())
    ours = {d["id"]: None for d in rows(out)}
    ours.update({d["id"]: d["contaminated_task"] for d in rows(out / ".removed" / "pipeline")
                 if d["removed_by"].startswith("decontaminate.")})
    assert ours.keys() == theirs.keys()
    differing = [key for key in ours if ours[key] != theirs[key]]
    assert len(differing) <= len(ours) / 1000, differing
    assert sum(1 for task in theirs.values() if task) > 150, "the comparison covers many hits"

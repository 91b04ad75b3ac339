"""`--annotate` through `curator-array run` on real text: every document a rule would drop is
kept and marked, the first rule of each is the rule a plain run drops it by (document for
document, and in status's counts), the documents no rule marks are a plain run's output with
its text edits, every rule a document fails is listed and tallied, and what cannot combine
is refused."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import curator_here as curator
from tests.integration.test_dclm_run import pages
from tests.support.quality_corpus import paragraphs, write_jsonl
from tests.support.warcs import write_warc
from tests.web_pages import pages as web_pages

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "2", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def rows_of(directory: Path) -> list[dict]:
    rows = [row for path in sorted(directory.glob("*.parquet")) for row in pq.read_table(path).to_pylist()]
    rows += [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines()]
    return rows


def status_of(out: Path) -> dict:
    return json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)


def documents_with_planted_drops() -> list[dict]:
    """Real paragraphs, with empty, short, long and repeated ones planted among them."""
    documents = [{"id": f"p{n}", "text": d["text"]} for n, d in enumerate(paragraphs())]
    for n in range(0, len(documents), 9):
        documents[n]["text"] = "   " if n % 2 else ""
    for n in range(4, len(documents), 13):
        documents[n]["text"] = documents[n - 1]["text"]  # a copy: exact dedup within the task
    for n in range(5, len(documents), 17):
        documents[n]["text"] = " ".join([documents[n]["text"]] * 12)  # too many words
    return documents


def plain_and_annotated(root: Path, options: list[str]) -> tuple[Path, Path]:
    outs = root / "plain", root / "annotated"
    for out, extra in zip(outs, ([], ["--annotate"])):
        curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), *options, *SMALL, *extra)
    return outs


@pytest.fixture(scope="module", params=["default", "dclm", "fineweb"])
def runs(request, tmp_path_factory):
    """A plain and an annotated run of one pipeline over the same input, and the input's ids
    (None for WARCs: the reader names their records)."""
    root = tmp_path_factory.mktemp(f"annotate-{request.param}")
    if request.param == "fineweb":
        (root / "in").mkdir()
        for index in range(3):
            write_warc(root / "in" / f"crawl-{index:02d}.warc.gz", web_pages(f"site{index}.example")[0])
        ids, options = None, ["--pipeline", "fineweb", "--input-file-type", "warc"]
    else:
        if request.param == "dclm":
            documents = [d for d in pages() if d["id"] != "numeric"]
            options = ["--pipeline", "dclm", "--input-file-type", "jsonl", "--dedup", "none"]  # the rules alone
        else:
            documents = documents_with_planted_drops()
            options = ["--drop-empty", "--min-words", "8", "--max-words", "300", "--dedup-within-task"]
        write_jsonl(root / "in" / "part-0.jsonl", documents[0::2])
        write_jsonl(root / "in" / "part-1.jsonl", documents[1::2])
        ids = {d["id"] for d in documents}
    plain, annotated = plain_and_annotated(root, options)
    return ids, plain, annotated


def test_the_unmarked_documents_are_the_plain_runs_output_with_its_edits(runs):
    ids, plain, annotated = runs
    kept = {row["id"]: row for row in rows_of(plain)}
    every = {row["id"]: row for row in rows_of(annotated)}
    assert len(every) == len(kept) + sum(status_of(plain)["dropped"].values()), "every document is kept"
    assert ids is None or set(every) == ids
    unmarked = {key: row for key, row in every.items() if row["would_drop"] is None}
    assert set(unmarked) == set(kept) and 0 < len(kept) < len(every)
    assert all(unmarked[key]["text"] == kept[key]["text"] for key in kept), "text edits still apply"
    assert all(row["would_drop_all"] == [] for row in unmarked.values())


def test_first_rule_counts_equal_the_plain_runs_drops_in_status(runs):
    _, plain, annotated = runs
    dropped, would = status_of(plain)["dropped"], status_of(annotated)
    assert would["dropped"] == dropped and len(dropped) >= 2, "by first rule, as a plain run drops them"
    marked = Counter(row["would_drop"] for row in rows_of(annotated) if row["would_drop"])
    assert dict(marked) == dropped, "each document marked by the rule a plain run dropped it by"
    shown = curator("status", "--checkpoint-path", str(annotated)).stdout
    assert "would drop   " in shown and "Documents each rule would drop, whether or not an earlier rule would" in shown
    curator("report", "--checkpoint-path", str(annotated), "-o", str(annotated.parent / "report.html"))
    page = (annotated.parent / "report.html").read_text()
    assert f"would drop: {next(iter(dropped))}" in page and "Documents each rule would drop" in page


def test_every_rule_a_document_fails_is_listed_and_tallied(runs):
    _, _, annotated = runs
    rows = rows_of(annotated)
    assert all(row["would_drop_all"][0] == row["would_drop"] for row in rows if row["would_drop"])
    tally = Counter(rule for row in rows for rule in row["would_drop_all"])
    assert status_of(annotated)["would_drop_any"] == dict(tally)
    assert tally.total() >= sum(1 for row in rows if row["would_drop"])


def test_a_document_several_rules_reject_lists_them_all(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": "short-and-twice", "text": "two words"},
                                              {"id": "again", "text": "two words"},
                                              {"id": "empty", "text": " "},
                                              {"id": "fine", "text": " ".join(["word"] * 20)},
                                              {"id": "fine-again", "text": " ".join(["word"] * 20)}])
    out = tmp_path / "out"
    curator("run", "--input-dir", str(tmp_path / "in"), "--output-dir", str(out), "--drop-empty", "--min-words", "5",
            "--dedup-within-task", "--annotate", *SMALL)
    rows = {row["id"]: row for row in rows_of(out)}
    assert rows["fine"]["would_drop"] is None and rows["fine-again"]["would_drop_all"] == ["exact_dedup"]
    assert rows["empty"]["would_drop_all"] == ["non_empty_text", "word_count"]
    assert rows["short-and-twice"]["would_drop_all"] == ["word_count"] == [rows["again"]["would_drop"]]
    assert rows["again"]["would_drop_all"] == ["word_count"], "dedup looks only at the documents no rule marked"


def test_what_cannot_combine_is_refused_and_a_clashing_field_fails_the_task(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": "1", "text": "some words here", "would_drop": "mine"}])
    base = ["run", "--input-dir", str(tmp_path / "in"), "--output-dir", str(tmp_path / "out"), *SMALL, "--annotate"]
    done = curator(*base, "--keep-removed", check=False)
    assert done.returncode == 2 and "--keep-removed with --annotate" in done.stderr
    done = curator(*base, "--dedup", "exact", check=False)
    assert done.returncode == 2 and "--annotate does not combine with --dedup yet" in done.stderr
    done = curator(*base, "--min-words", "2", check=False)
    assert done.returncode != 0 and "a.jsonl already has a field 'would_drop'" in done.stderr

"""``--pipeline dclm`` through ``curator-array run`` on real Ray: pages of real text in the shape
DCLM-Pool has (JSONL with text and url) and as WARC records, each page decided by the run as
the rules decide it on its own, every step's drops and every modifier's lines counted in the
manifest and ``status``, dropped pages kept with their step, and bad input refused."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_array.stages.web import dclm_rules as rules
from curator_array.stages.web.extract import dclm_text
from curator_array.stages.web.fasttext_language import LABEL_PREFIX, bundled_model, load_model
from tests.conftest import REPO
from tests.conftest import curator_here as curator
from tests.support.quality_corpus import paragraphs, write_jsonl
from tests.support.warcs import Page, write_warc

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "2", "--object-store-memory", str(100 * 2**20), "--no-progress"]
EXTRA_LINES = ["THIS LINE IS SHOUTED AT EVERY READER", "12 likes", "Share", "3 items in cart", "Read more..."]


def alone() -> rules.RefinedWebRules:
    """The rules with the run's model and no listed domain, applied outside the run."""
    model = load_model(bundled_model())

    def language(line: str) -> tuple[str, float]:
        labels, scores = model.predict(line, k=1)
        return labels[0].removeprefix(LABEL_PREFIX), float(scores[0])

    return rules.RefinedWebRules(language, lambda key: False)


def pages() -> list[dict]:
    """Pages of a dozen paragraphs each in ten languages; a few with lines the modifiers take
    out, URLs the URL rules drop, a repeated paragraph, and one whose text is a number."""
    by_source: dict[tuple[str, str], list[str]] = {}
    for paragraph in paragraphs():
        by_source.setdefault((paragraph["source"], paragraph["language"]), []).append(paragraph["text"])
    documents = []
    for (source, language), texts in sorted(by_source.items()):
        for start in range(0, len(texts), 12):
            number = len(documents)
            text = "\n".join(texts[start:start + 12])
            url = f"https://{source}.example/{language}/{start}"
            if number % 7 == 1:
                text += "\n" + "\n".join(EXTRA_LINES)
            if number % 11 == 2:
                url = f"https://{source}.example/porn/{start}"
            if number % 13 == 3:
                text += "\n" + "\n".join([texts[start]] * 6)
            documents.append({"id": f"page-{number}", "text": text, "url": url})
    documents.append({"id": "numeric", "text": 12345, "url": "https://numbers.example/"})
    return documents


def manifest_of(out: Path) -> dict:
    return json.loads((out / ".nemo_curator_metadata" / ".slurm_array_completion" /
                       "completed_slurm_array_0.json").read_text())


def rows_of(directory: Path) -> list[dict]:
    return [row for path in sorted(directory.glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


@pytest.fixture(scope="module")
def jsonl_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("dclm")
    documents = pages()
    write_jsonl(root / "in" / "part-0.jsonl", documents[0::2])
    write_jsonl(root / "in" / "part-1.jsonl", documents[1::2])
    out = root / "out"
    curator("run", "--pipeline", "dclm", "--input-dir", str(root / "in"), "--input-file-type", "jsonl",
            "--output-dir", str(out), "--keep-removed", "--dedup", "none", *SMALL)  # the rules alone
    return documents, out


def test_each_page_is_decided_and_edited_as_the_rules_decide_it_alone(jsonl_run):
    documents, out = jsonl_run
    recipe = alone()
    expected = {d["id"]: recipe(d["text"], d["url"]) for d in documents}
    written = {row["id"]: row for row in rows_of(out)}
    assert set(written) == {key for key, outcome in expected.items() if outcome.dropped_by is None}
    assert all(written[key]["text"] == expected[key].text for key in written)
    assert 0 < len(written) < len(documents)
    dropped = Counter(outcome.dropped_by for outcome in expected.values() if outcome.dropped_by)
    assert {rules.LANGUAGE, rules.URL_HARD, rules.REPETITION, rules.NOT_TEXT} <= set(dropped)
    work = manifest_of(out)
    assert {step: count for step, count in work["rows_dropped_by_stage"].items() if count} == \
        {f"dclm.{step}": count for step, count in dropped.items()}
    lines = Counter()
    for outcome in expected.values():
        lines.update(outcome.lines_removed)
    assert work["lines_removed"] == {f"dclm.{name}": count for name, count in lines.items() if count}
    assert work["lines_removed"]["dclm.counter_line_modifier"] > 0


def test_status_shows_every_step_and_the_lines_removed(jsonl_run):
    _, out = jsonl_run
    report = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    assert report["lines_removed"]["dclm.uppercase_ratio_line_modifier"] > 0
    assert "dclm.language_filter" in report["dropped"]
    shown = curator("status", "--checkpoint-path", str(out)).stdout
    removed = next(line for line in shown.splitlines() if "Lines removed from the documents kept" in line)
    assert "dclm.uppercase_ratio_line_modifier" in removed and "dclm.massive_web_repetition_filters" in shown, shown


def test_dropped_pages_are_kept_as_they_came_with_their_step(jsonl_run):
    documents, out = jsonl_run
    kept = rows_of(out / ".removed" / "pipeline")
    by_id = {d["id"]: d for d in documents}
    assert kept and all(row["removed_by"].startswith("dclm.") for row in kept)
    assert all(row["text"] == by_id[row["id"]]["text"] for row in kept if row["id"] != "numeric")
    assert {row["removed_by"] for row in kept if row["id"] == "numeric"} == {f"dclm.{rules.NOT_TEXT}"}


def test_input_without_a_url_fails_its_task_naming_the_file_and_field(tmp_path):
    write_jsonl(tmp_path / "in" / "no-url.jsonl", [{"id": "a", "text": "Some words here."}])
    done = curator("run", "--pipeline", "dclm", "--input-dir", str(tmp_path / "in"), "--input-file-type", "jsonl",
                   "--output-dir", str(tmp_path / "out"), *SMALL, check=False)
    assert done.returncode != 0
    assert "'url'" in done.stderr and "no-url.jsonl" in done.stderr


def test_a_url_line_in_a_site_blocklist_is_refused(tmp_path):
    listed = tmp_path / "block.txt"
    listed.write_text("blocked.example\nhttps://town.example/page\n")
    done = curator("run", "--pipeline", "dclm", "--input-dir", str(tmp_path), "--input-file-type", "jsonl",
                   "--url-blocklist", str(listed), "--output-dir", str(tmp_path / "out"), *SMALL, check=False)
    assert done.returncode == 2 and "blocks domains" in done.stderr


def test_warc_pages_are_extracted_with_resiliparse_then_decided(tmp_path):
    html = [json.loads(line)["html"] for line in gzip.open(REPO / "tests" / "fixtures" / "fineweb-pages.jsonl.gz",
                                                            "rt", encoding="utf-8")]
    urls = [f"https://docs.example/page-{number}.html" for number in range(len(html))]
    (tmp_path / "in").mkdir()
    write_warc(tmp_path / "in" / "pages.warc.gz", [Page(url, page.encode()) for url, page in zip(urls, html)])
    out = tmp_path / "out"
    curator("run", "--pipeline", "dclm", "--input-dir", str(tmp_path / "in"), "--input-file-type", "warc",
            "--output-dir", str(out), "--dedup", "none", *SMALL)
    recipe = alone()
    expected = {}
    for url, page in zip(urls, html):
        text = dclm_text(page)
        outcome = recipe(text, url) if text else None
        if outcome is not None and outcome.dropped_by is None:
            expected[url] = outcome.text
    written = {row["url"]: row["text"] for row in rows_of(out)}
    assert written == expected and len(written) > 20

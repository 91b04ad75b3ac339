"""``--pipeline fineweb`` on real Ray: each of FineWeb's steps drops what it should, the rows
have FineWeb's columns, PII is replaced, and ``--keep-removed`` keeps what each step dropped,
once, however often a task is rerun."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import load_pipeline
from curator_array.run.shard import run_shard_here
from curator_array.stages.web.url_lists import LISTS_DIR, UrlLists
from tests.conftest import curator_cli
from tests.support.pathological_extractor import slow_page
from tests.support.warcs import Page, write_warc
from tests.web_pages import ARTICLES, TITLES, html_page

pytestmark = pytest.mark.ray
CRAWL = "CC-MAIN-2024-10"
PII = "Write to jane.doe@mail-host.org, or reach our server at 8.8.4.4; the office printer is at 192.168.1.20."


def planted_pages(banned_word: str) -> tuple[list[Page], dict[str, str | None]]:
    """The pages, and per URL the step that must drop it (None: kept)."""
    pages, fate = [], {}

    def add(url, html, dropped_by, **kwargs):
        pages.append(Page(url, html.encode() if isinstance(html, str) else html, **kwargs))
        fate[url] = dropped_by

    for index in range(3):
        add(f"https://rivers.example/{index}", html_page(f"{TITLES['en']} {index}", ARTICLES["en"]), None)
    add("https://rivers.example/contact", html_page("Contact", [*ARTICLES["en"], PII]), None)
    add(f"https://rivers.example/{banned_word}-gallery", html_page(TITLES["en"], ARTICLES["en"]),
        "url_filter.hard_blacklisted")
    add("https://news.blocked-by-site.com/a", html_page(TITLES["en"], ARTICLES["en"]), "url_filter.domain")
    add("https://rivers.example/huge", slow_page(), "html_extract.timeout")
    add("https://rivers.example/es", html_page(TITLES["es"], ARTICLES["es"], "es"), "language.not_kept")
    add("https://rivers.example/spam", html_page("Flights", ["Cheap flights to every city, book cheap flights."] * 30),
        "gopher_repetition")
    lorem = [*ARTICLES["en"][:6], "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor."]
    add("https://rivers.example/lorem", html_page("Template", lorem), "c4_quality.lorem_ipsum")
    add("https://rivers.example/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), "skipped", content_type="image/png")
    return pages, fate


@pytest.fixture(scope="module")
def crawl_tree(tmp_path_factory):
    word = sorted(w for w in UrlLists.load(LISTS_DIR).banned_words if w.isalpha() and len(w) > 3)[0]
    root = tmp_path_factory.mktemp("fineweb")
    warc = root / "input" / "crawl-data" / CRAWL / "segments" / "1" / "warc" / "part-0.warc.gz"
    warc.parent.mkdir(parents=True)
    pages, fate = planted_pages(word)
    write_warc(warc, pages)
    (root / "blocked.txt").write_text("# our own list\nblocked-by-site.com\n")
    return root, fate


def run_fineweb(root: Path, out: Path, checkpoint: Path):
    options = PipelineOptions.of(root / "input", out, input_file_type="warc", keep_removed=True,
                                 url_blocklist=(str(root / "blocked.txt"),))
    pipeline = load_pipeline("fineweb", options).for_run(options)
    return run_shard_here(pipeline, checkpoint, output_dir=out)


def removed(out: Path) -> dict[str, dict[str, str]]:
    """step → {url: rule} of the documents kept under .removed/pipeline/, a file per task."""
    found: dict[str, dict[str, str]] = {}
    seen: set[str] = set()
    for path in sorted((out / ".removed" / "pipeline").glob("*.parquet")):
        rows = pq.read_table(path, columns=["url", "removed_by"]).to_pylist()
        assert not seen & {r["url"] for r in rows}, "a removed document is written once"
        seen.update(r["url"] for r in rows)
        for row in rows:
            found.setdefault(row["removed_by"].partition(".")[0], {})[row["url"]] = row["removed_by"]
    return found


def test_each_step_drops_its_pages_and_keeps_them_aside(two_node_cluster, crawl_tree, tmp_path):
    root, fate = crawl_tree
    out = tmp_path / "out"
    outcome = run_fineweb(root, out, tmp_path / "ckpt")
    assert outcome.status == "completed"

    rows = [r for p in sorted(out.glob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    assert {r["url"] for r in rows} == {url for url, step in fate.items() if step is None}
    assert list(rows[0]) == ["text", "id", "url", "date", "dump", "warc_path", "language", "language_score"]
    assert {(r["dump"], r["warc_path"], r["language"]) for r in rows} == {
        (CRAWL, f"crawl-data/{CRAWL}/segments/1/warc/part-0.warc.gz", "en")}
    assert all(r["language_score"] > 0.65 and r["id"].startswith("<urn:uuid:") for r in rows)
    contact = next(r["text"] for r in rows if r["url"].endswith("/contact"))
    assert "jane.doe@mail-host.org" not in contact and "8.8.4.4" not in contact
    assert "@example." in contact and "192.168.1.20" in contact, "private addresses identify no one"

    dropped = {k: v for k, v in outcome.work.rows_dropped_by_stage.items() if v}
    for step in {s for s in fate.values() if s not in (None, "skipped")}:
        assert sum(v for k, v in dropped.items() if k.startswith(step)) == list(fate.values()).count(step), dropped
    assert outcome.work.records_skipped == {"non_html_records": 1}

    kept_aside = removed(out)
    for url, step in fate.items():
        if step not in (None, "skipped"):
            assert kept_aside[step.partition(".")[0]][url].startswith(step), (url, kept_aside)
    assert sum(map(len, kept_aside.values())) == sum(dropped.values())


def test_a_rerun_rewrites_what_it_kept_aside_and_adds_nothing(two_node_cluster, crawl_tree, tmp_path):
    root, _ = crawl_tree
    out = tmp_path / "out"
    assert run_fineweb(root, out, tmp_path / "first").status == "completed"
    before = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}
    first = removed(out)
    shutil.rmtree(tmp_path / "first")  # the task is done again, as a retry after a lost record would
    assert run_fineweb(root, out, tmp_path / "second").status == "completed"
    assert removed(out) == first
    assert {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.parquet"))} == before


def test_the_fineweb_pipeline_through_the_command_line(crawl_tree, tmp_path):
    """As a user runs it: the same pages kept, and no error-level line of Ray's in a run that
    succeeded (``curator_cli`` checks every run's output for them)."""
    root, fate = crawl_tree
    out = tmp_path / "out"
    curator_cli("run", "--pipeline", "fineweb", "--input-dir", str(root / "input"), "--output-dir", str(out),
                "--input-file-type", "warc", "--url-blocklist", str(root / "blocked.txt"), "--num-cpus", "1",
                "--object-store-memory", str(100 * 2**20), "--no-progress")
    rows = [r for p in sorted(out.glob("*.parquet")) for r in pq.read_table(p, columns=["url"]).to_pylist()]
    assert {r["url"] for r in rows} == {url for url, step in fate.items() if step is None}

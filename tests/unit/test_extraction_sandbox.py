"""The per-page extraction deadline: a page that hangs, crashes or breaks the extractor costs
its own page only, and the pages after it are extracted as before (a real child process)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from curator_array.stages.tasks import DocumentBatch
from curator_array.stages.web.extract import HtmlExtractor, fineweb_text
from curator_array.stages.web.sandbox import ExtractionSandbox, Outcome
from tests.support.pathological_extractor import CRASH, RAISE, slow_page

pytest.importorskip("trafilatura")
PLANTED = "tests.support.pathological_extractor:extract"


def article(title: str) -> str:
    body = "".join(f"<p>{title}: sentence {i} of an article that says something useful about rivers.</p>"
                   for i in range(8))
    return f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}</article></body></html>"


def test_hang_crash_and_bug_each_cost_one_page():
    sandbox = ExtractionSandbox(PLANTED, timeout_s=1.0)
    try:
        pages = [article("First"), slow_page(), article("Second"), f"<p>{CRASH}</p>", article("Third"),
                 f"<p>{RAISE}</p>", article("Fourth")]
        results = [sandbox.extract(page) for page in pages]
    finally:
        sandbox.close()
    assert [outcome for outcome, _ in results] == [Outcome.DONE, Outcome.TIMEOUT, Outcome.DONE, Outcome.ERROR,
                                                   Outcome.DONE, Outcome.ERROR, Outcome.DONE]
    for (_, text), title in zip(results[::2], ("First", "Second", "Third", "Fourth")):
        assert f"{title}: sentence 3 of an article" in text


def test_a_new_childs_set_up_is_not_charged_to_a_page():
    """The first call of a new child (after a start or a restart) is made before any page, so
    a slow start never turns the page after it into a timeout."""
    sandbox = ExtractionSandbox("tests.support.pathological_extractor:slow_to_start", timeout_s=1.0)
    try:
        assert sandbox.extract(article("First"))[0] is Outcome.DONE
        sandbox.close()
        assert sandbox.extract(article("After a restart"))[0] is Outcome.DONE
    finally:
        sandbox.close()


def test_the_sandbox_extracts_what_the_extractor_extracts_in_process():
    sandbox = ExtractionSandbox(f"curator_array.stages.web.extract:{fineweb_text.__name__}", timeout_s=30)
    try:
        page = article("Same")
        assert sandbox.extract(page) == (Outcome.DONE, fineweb_text(page))
    finally:
        sandbox.close()


def test_the_stage_counts_each_outcome_and_keeps_the_good_pages():
    stage = HtmlExtractor(PLANTED, timeout_s=1.0)
    pages = [article("Kept"), slow_page(), f"<p>{CRASH}</p>", f"<p>{RAISE}</p>", "<html><body></body></html>"]
    batch = DocumentBatch("t", table=pa.table({"url": [f"u{i}" for i in range(len(pages))], "html": pages}))
    out = stage.process(batch)
    assert out.table.column("url").to_pylist() == ["u0"]
    assert {k: v for k, v in out.counters.dropped.items() if v} == {
        "html_extract.timeout": 1, "html_extract.error": 2, "html_extract.no_main_text": 1}



@pytest.mark.parametrize("timeout_s", [None, 5.0])
def test_each_batch_is_extracted_as_if_no_page_came_before(timeout_s):
    """FineWeb's trafilatura drops blocks it saw more than twice in earlier pages of the
    process; each batch starts afresh, so its output depends on its own pages, not on which
    worker ran what before it."""
    from curator_array.stages.web.extract import FINEWEB_EXTRACTOR

    stage = HtmlExtractor(FINEWEB_EXTRACTOR, timeout_s=timeout_s)
    page = article("Repeated")

    def extracted(copies: int) -> list[str]:
        batch = DocumentBatch("t", table=pa.table({"url": [f"u{i}" for i in range(copies)], "html": [page] * copies}))
        return stage.process(batch).table.column("text").to_pylist()

    within = extracted(4)
    assert len(within) < 4 or within[-1] != within[0], "within a batch, repeats are removed as FineWeb removed them"
    assert extracted(1) == within[:1]

"""``--pipeline fineweb`` decides as datatrove's FineWeb steps do, page by page, on real HTML.

The pages are whole pages of Debian's documentation in five languages
(``tests/fixtures/fineweb-pages.jsonl.gz``, ``tests/support/build_fineweb_pages.py``). Some
get URLs planted from FineWeb's own lists (read from datatrove's wheel in the reference
environment, never stored here), one rule each; some get a sentence with an e-mail address
and public and private IPv4 addresses; one page takes trafilatura seconds (the 1 s deadline)
and one has no text. Our pipeline runs on real Ray from a WARC; datatrove 0.10.1's steps run
in the reference environment (``tests/support/reference_fineweb.py``) with the same
trafilatura and the same fastText model file.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import tarfile
from collections import Counter

import pyarrow.parquet as pq
import pytest

from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import load_pipeline
from curator_array.run.shard import run_shard_here
from curator_array.stages.web.fasttext_language import bundled_model
from curator_array.stages.web.pii import EMAIL_PLACEHOLDERS, IP_PLACEHOLDERS
from tests.conftest import REPO
from tests.support.pathological_extractor import slow_page
from tests.support.reference_site import (
    SITE,
    ensure_reference_site,
    reference_environment,
    reference_output,
)
from tests.support.warcs import Page, record_id_of, write_warc

pytestmark = pytest.mark.ray
PAGES = REPO / "tests" / "fixtures" / "fineweb-pages.jsonl.gz"
PII = " Write to the.maintainer@lists.example.org or to 130.89.148.77; the build host is 10.1.2.3."
PLACEHOLDER = re.compile("|".join(re.escape(p) for p in (*EMAIL_PLACEHOLDERS, *IP_PLACEHOLDERS)))
STEPS = ("url_filter", "html_extract", "language", "gopher_repetition", "gopher_quality", "c4_quality",
         "fineweb_quality")


def placeholders_named(text: str) -> str:
    """The text with each PII placeholder read as one: which placeholder replaces an address
    differs on purpose (ours starts again with each document; docs/filters.md)."""
    return PLACEHOLDER.sub("<pii>", text)


def needed(problem: Exception) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(str(problem))
    pytest.skip(str(problem))


def planted_urls() -> list[str]:
    """URLs for each URL rule, from FineWeb's lists as datatrove's wheel ships them."""
    assets = SITE / "datatrove" / "assets"
    with tarfile.open(assets / "url_filterblacklistsv0_3_0.tar.gz") as archive:
        lists = {m.name: archive.extractfile(m).read().decode().split() for m in archive.getmembers()}
    words = {name: sorted(w.strip() for w in (assets / f"{name}.txt").read_text().splitlines()
                          if w.strip().replace(" ", "").isalpha() and len(w) > 3)
             for name in ("banned_words", "soft_banned_words", "banned_subwords")}
    domains = sorted(lists["domains"])
    plain = [d for d in domains if d.count(".") == 1 and d.replace(".", "").isalnum()][1000:1005]
    under_a_suffix = [d for d in domains if ".blogspot." in d][:3]  # its host is blocked, not its registered domain
    soft = [w for w in words["soft_banned_words"] if " " not in w]
    return [*(f"https://{d}/index.html" for d in plain), *(f"https://docs.{d}/page" for d in plain[:2]),
            *(f"https://{d}/post" for d in under_a_suffix),
            *sorted(lists["urls"])[100:103],  # as listed: the rule matches the URL as written
            *[f"https://news.example.com/{w}-today" for w in words["banned_words"] if " " not in w][:4],
            *(f"https://forum.example.com/{a}/{b}" for a, b in zip(soft[:4], soft[4:8])),
            *(f"https://www.ex{w.replace(' ', '')}ample.com/" for w in words["banned_subwords"][:4])]


def with_pii(html: str) -> str:
    head, found, tail = html.partition("</p>")
    return f"{head}{PII}{found}{tail}" if found else html


@pytest.fixture(scope="module")
def pages():
    with gzip.open(PAGES, "rt", encoding="utf-8") as handle:
        fixture = [json.loads(line) for line in handle]
    urls = planted_urls()
    pages = []
    for index, page in enumerate(fixture):
        url = urls[index] if index < len(urls) else f"https://docs.example.org/{page['name'].replace('/', '-')}"
        html = with_pii(page["html"]) if page["language"] == "en" and index % 7 == 3 else page["html"]
        pages.append({"id": record_id_of(url), "url": url, "html": html, "language": page["language"]})
    planted = (("https://docs.example.org/huge", slow_page()), ("https://docs.example.org/empty", "<html></html>"))
    for url, html in planted:
        pages.append({"id": record_id_of(url), "url": url, "html": html, "language": "en"})
    return pages


def reference_decisions(pages, tmp_path) -> dict[str, dict]:
    try:
        ensure_reference_site()
    except RuntimeError as problem:
        needed(problem)
    source = tmp_path / "pages.jsonl"
    source.write_text("".join(json.dumps({k: p[k] for k in ("id", "url", "html")}) + "\n" for p in pages))
    env = dict(reference_environment(), HF_HOME=str(tmp_path / "hf"), TLDEXTRACT_CACHE=str(tmp_path / "tld"),
               TLDEXTRACT_CACHE_TIMEOUT="2")
    printed = reference_output([sys.executable, str(REPO / "tests" / "support" / "reference_fineweb.py"), str(source),
                                str(bundled_model())], env, timeout=900)
    return {row["id"]: row for row in map(json.loads, printed.splitlines())}


def our_decisions(pages, tmp_path) -> dict[str, dict]:
    warc = tmp_path / "input" / "pages.warc.gz"
    warc.parent.mkdir()
    write_warc(warc, [Page(p["url"], p["html"].encode()) for p in pages])
    out = tmp_path / "out"
    options = PipelineOptions(str(warc.parent), str(out), input_file_type="warc", keep_removed=True)
    outcome = run_shard_here(load_pipeline("fineweb", options).for_run(options), tmp_path / "ckpt",
                             output_dir=out)
    assert outcome.status == "completed"
    decisions = {}
    for path in sorted(out.glob("*.parquet")):
        for row in pq.read_table(path, columns=["id", "text"]).to_pylist():
            decisions[row["id"]] = {"dropped_by": None, "text": row["text"]}
    for path in sorted((out / ".removed").glob("*/*.parquet")):
        for row in pq.read_table(path, columns=["id", "removed_by"]).to_pylist():
            decisions[row["id"]] = {"dropped_by": row["removed_by"].partition(".")[0], "text": None,
                                    "rule": row["removed_by"]}
    return decisions


def test_our_fineweb_decides_as_datatrove_page_by_page(two_node_cluster, pages, tmp_path):
    reference = reference_decisions(pages, tmp_path)
    ours = our_decisions(pages, tmp_path)
    ids = [p["id"] for p in pages]
    assert set(ours) == set(reference) == set(ids), "every page is decided once"

    same_decision = sum((ours[i]["dropped_by"] is None) == (reference[i]["dropped_by"] is None) for i in ids)
    both_kept = [i for i in ids if ours[i]["dropped_by"] is None and reference[i]["dropped_by"] is None]
    same_text = sum(placeholders_named(ours[i]["text"]) == placeholders_named(reference[i]["text"]) for i in both_kept)
    ours_by_step, theirs_by_step = (Counter(d[i]["dropped_by"] for i in ids) for d in (ours, reference))
    report = (f"{len(ids)} pages: same keep/drop {same_decision} ({same_decision / len(ids):.1%}); both kept "
              f"{len(both_kept)}, same text {same_text}; dropped by step, ours {dict(ours_by_step)}, "
              f"datatrove {dict(theirs_by_step)}")
    print(report)
    assert same_decision >= 0.97 * len(ids), report
    assert both_kept and same_text >= 0.95 * len(both_kept), report
    assert all(ours_by_step[step] and theirs_by_step[step] for step in STEPS), f"a step dropped nothing: {report}"
    url_rules = {ours[i]["rule"] for i in ids if ours[i]["dropped_by"] == "url_filter"}
    assert len(url_rules) == 6, f"every URL rule is planted: {url_rules}"
    replaced = [i for i in both_kept if "the.maintainer@lists.example.org" in next(p["html"] for p in pages
                                                                                      if p["id"] == i)]
    assert replaced and all("the.maintainer@" not in ours[i]["text"] and "130.89.148.77" not in ours[i]["text"]
                            for i in replaced), report

"""FineWeb's URL filter decides as datatrove's, on URLs made from the lists themselves.

The lists are the ones ``make install`` fetched from datatrove's wheel on PyPI
(``stages/web/url_lists.py``); the reference is datatrove 0.10.1's ``URLFilter`` in its own
environment (``tests/support/reference_url_filter.py``), which builds 3,351 URLs that hit
every rule (and ordinary ones that hit none) and reports each one's first failing rule.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from curator_array.core.errors import ConfigError
from curator_array.stages.tasks import DocumentBatch
from curator_array.stages.web.url_filter import UrlFilter
from curator_array.stages.web.url_lists import UrlLists
from tests.conftest import REPO
from tests.support.reference_site import (
    ensure_reference_site,
    reference_environment,
    reference_output,
)

RULES = ("no_url", "domain", "subdomain", "url", "hard_blacklisted", "soft_blacklisted", "blacklisted_subword")


def needed(problem: Exception) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(str(problem))
    pytest.skip(str(problem))


@pytest.fixture(scope="module")
def installed_lists() -> UrlLists:
    try:
        return UrlLists.load()
    except ConfigError as problem:
        needed(problem)


def first_failing_rules(stage: UrlFilter, urls: list[str | None]) -> list[str | None]:
    table = pa.table({"url": pa.array(urls, pa.string())})
    _, masks = stage.score(table, table.column("url"))
    assert tuple(masks) == RULES
    first: list[str | None] = [None] * len(urls)
    for rule, mask in masks.items():
        for index, passed in enumerate(mask.to_pylist()):
            if not passed and first[index] is None:
                first[index] = rule
    return first


def test_every_url_gets_the_reference_decision(installed_lists, tmp_path):
    try:
        ensure_reference_site()
    except RuntimeError as problem:
        needed(problem)
    env = dict(reference_environment(), HF_HOME=str(tmp_path / "hf"), TLDEXTRACT_CACHE=str(tmp_path / "tld"),
               TLDEXTRACT_CACHE_TIMEOUT="2")  # no network: tldextract falls back to its bundled suffix list
    script = REPO / "tests" / "support" / "reference_url_filter.py"
    reference = json.loads(reference_output([sys.executable, str(script)], env))
    ours = first_failing_rules(UrlFilter(), [row["url"] for row in reference])
    differing = [(row["url"], row["rule"], rule) for row, rule in zip(reference, ours) if row["rule"] != rule]
    assert differing == []
    hits = {rule: ours.count(rule) for rule in RULES}
    assert all(hits[rule] >= 50 for rule in RULES[1:]), hits
    assert ours.count(None) >= 1000, "ordinary URLs pass"


def test_a_sites_own_lists_add_to_fineweb_s_and_a_page_without_url_is_counted(installed_lists):
    stage = UrlFilter(extra_domains=("intranet-corp.com",), extra_urls=("https://news.example/leak",))
    urls = ["https://wiki.intranet-corp.com/page", "https://intranet-corp.com/", "https://news.example/leak",
            "https://news.example/leak2", None, "https://www.python.org/doc/"]
    assert first_failing_rules(stage, urls) == ["domain", "domain", "url", None, "no_url", None]
    batch = stage.process(DocumentBatch("t", {}, table=pa.table({"url": urls, "text": ["x"] * len(urls)})))
    assert batch.table.column("url").to_pylist() == ["https://news.example/leak2", "https://www.python.org/doc/"]
    assert {rule: n for rule, n in batch.counters.dropped.items() if n} == {
        "url_filter.domain": 2, "url_filter.url": 1, "url_filter.no_url": 1}


def test_missing_lists_are_refused_naming_the_install_command(tmp_path):
    with pytest.raises(ConfigError, match=r"not installed in .*: run .* -m curator_array\.stages\.web\.url_lists"):
        UrlFilter(lists_dir=str(tmp_path)).setup()


def test_run_and_submit_without_the_lists_stop_before_any_work_in_one_line(tmp_path):
    """What a pip install without the lists meets: one line naming them and the command that
    installs them, exit 2, nothing written, no Ray process left."""
    from curator_array.execution.ray_cluster import live_process_stats
    from tests.conftest import curator_cli
    from tests.support.warcs import Page, write_warc

    ray_temp = Path(tempfile.mkdtemp(prefix="ut-", dir="/tmp"))  # short: Ray's socket paths

    def ray_nodes() -> set[int]:
        """Ray nodes started under this test's temp dir (other tests' elements may be starting theirs)."""
        found = set()
        for pid, _ in live_process_stats():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    words = handle.read().split(b"\0")
            except OSError:
                continue
            if (b"curator_array.execution.ray_internals.launcher" in words
                    and any(word.startswith(f"--temp-dir={ray_temp}/".encode()) for word in words)):
                found.add(pid)
        return found


    (tmp_path / "in").mkdir()
    write_warc(tmp_path / "in" / "a.warc.gz", [Page(f"https://example.com/{i}", b"<p>words</p>") for i in range(3)])
    absent, out = tmp_path / "no-lists", tmp_path / "out"
    expected = (f"curator-array: error: stage url_filter needs FineWeb's URL lists in {absent} (not installed here): "
                f"run python -m curator_array.stages.web.url_lists {absent}")
    args = ["--pipeline", "fineweb", "--input-dir", str(tmp_path / "in"), "--input-file-type", "warc",
            "--blocklists-dir", str(absent)]
    for command in (["run", "--output-dir", str(out), *args],
                    ["submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"), "--total-shards", "2",
                     "--max-array-size", "none", "--", "--output-dir", str(out), *args]):
        done = curator_cli(*command, check=False, env={"TMPDIR": str(ray_temp)})
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [expected], done.stderr
        assert not out.exists() and not absent.exists()
    try:
        assert not ray_nodes(), "no Ray node of the refused runs is left"
    finally:
        shutil.rmtree(ray_temp, ignore_errors=True)

"""The built-in commoncrawl pipeline on real Ray: WARC files built here, read from a
directory or downloaded under the per-node cap from the fault-injecting server."""

from __future__ import annotations

import collections
import gzip
import html
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_array.core.records.shard import ShardWork
from curator_array.core.sharding import ShardConfig
from curator_array.execution.ray_data import RayDataExecutor
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import load_pipeline
from curator_array.run.shard import run_shard_here
from tests.conftest import REPO
from tests.integration.helper_stages import ProbedDownloadStage, peak_concurrency
from tests.support.fault_server import FaultServer
from tests.support.warcs import Page, write_warc
from tests.web_pages import ARTICLES, BOILERPLATE, html_page, pages

pytestmark = pytest.mark.ray
KEEP = ("en", "de", "ja")
PROSE = REPO / "tests" / "fixtures" / "multilingual-prose.jsonl.gz"


@pytest.fixture(scope="module")
def warc_dir(tmp_path_factory):
    """Six WARC files, each with every page (good, bad, non-HTML, truncated) of its own host."""
    directory = tmp_path_factory.mktemp("warcs")
    expected = {}
    for index in range(6):
        records, outcome = pages(f"site{index}.example")
        write_warc(directory / f"crawl-{index:02d}.warc.gz", records)
        expected.update(outcome)
    return directory, expected


def outputs(out: Path) -> dict[str, dict]:
    rows = [r for path in sorted(out.glob("*.parquet")) for r in pq.read_table(path).to_pylist()]
    by_url = {r["url"]: r for r in rows}
    assert len(by_url) == len(rows), "no document written twice"
    return by_url


def options(source: dict, out: Path, **extra) -> PipelineOptions:
    return PipelineOptions.from_values({"output_dir": str(out), "languages": KEEP, "records_per_batch": 4, **source,
                                        **extra})


def check_documents(written: dict[str, dict], expected: dict[str, dict]) -> None:
    kept = {url for url, e in expected.items() if e["kept"]}
    assert set(written) == kept
    for url, row in written.items():
        lang = expected[url]["language"]
        assert row["language"] == lang and row["language_score"] > 0.9
        assert all(sentence in row["text"] for sentence in ARTICLES[lang]), url
        assert not any(noise in row["text"] for noise in BOILERPLATE), url
        assert row["gopher_word_count"] >= 50 and row["c4_lines_removed"] == 0  # FineWeb keeps the title


def check_counts(work: ShardWork, expected: dict[str, dict]) -> None:
    dropped = {k: v for k, v in work.rows_dropped_by_stage.items() if v}
    wanted: dict[str, int] = {}
    for outcome in expected.values():
        if "dropped_by" in outcome:
            wanted[outcome["dropped_by"]] = wanted.get(outcome["dropped_by"], 0) + 1
    for rule, count in wanted.items():
        assert sum(v for k, v in dropped.items() if k.startswith(rule)) == count, (rule, dropped)
    assert sum(dropped.values()) == sum(wanted.values()), dropped
    skips = [e["skipped"] for e in expected.values() if "skipped" in e]
    assert work.records_skipped == {reason: skips.count(reason) for reason in set(skips)}


def test_warc_directory_three_shards_equal_one_run(two_node_cluster, warc_dir, tmp_path):
    directory, expected = warc_dir
    source = {"input_dir": str(directory), "input_file_type": "warc"}
    whole = tmp_path / "whole"
    outcome = run_shard_here(load_pipeline("commoncrawl", options(source, whole)), tmp_path / "c1", output_dir=whole)
    assert outcome.status == "completed"
    check_documents(outputs(whole), expected)
    check_counts(outcome.work, expected)
    assert outcome.work.rows_in == sum(1 for e in expected.values() if "skipped" not in e)
    # a WARC's parts are row groups of one file, named after the task and its first part
    assert len(outcome.work.output_files) <= len(outcome.work.source_task_ids)
    assert all(re.search(r"\.\d{5}\.parquet$", name) for name in outcome.work.output_files)

    sharded = tmp_path / "sharded"
    pipeline = load_pipeline("commoncrawl", options(source, sharded))
    owned = []
    for index in range(3):
        part = run_shard_here(pipeline, tmp_path / "c3", ShardConfig(index, 3), output_dir=sharded)
        assert part.status == "completed"
        owned += part.work.source_task_ids
    assert sorted(owned) == sorted(set(owned)) and len(owned) == 6
    assert outputs(sharded) == outputs(whole)


def test_urls_downloaded_under_the_per_node_cap_then_extracted(two_node_cluster, warc_dir, tmp_path):
    directory, expected = warc_dir
    files = {path.name: path.read_bytes() for path in sorted(directory.glob("*.warc.gz"))}
    server = FaultServer(files, per_connection_rate=20_000).start()
    try:
        lists = tmp_path / "warc_urls.txt"
        lists.write_text("".join(server.url("flaky503", name) + "\n" for name in files))
        out, probe = tmp_path / "out", tmp_path / "probe"
        pipeline = load_pipeline("commoncrawl", options({"input_dir": "", "input_urls": (str(lists),)}, out))
        download = pipeline.stages[0]
        assert download.stage_name == "download"
        # Two per node, as many as each node's download slots: the hard cap. Below it the pool
        # is only spread by Ray's best effort, and two workers may share a node.
        pipeline.stages[0] = ProbedDownloadStage(str(download.download_dir), str(probe), workers_per_node=2)
        executor = RayDataExecutor(progress_bars=False)
        outcome = run_shard_here(pipeline, tmp_path / "ckpt", output_dir=out, executor=executor)
    finally:
        server.stop()
    assert outcome.status == "completed"
    assert executor.pool_choices["download"].size == 4
    per_node = {p.name: peak_concurrency(str(p)) for p in probe.iterdir() if p.is_dir()}
    assert per_node and all(peak <= 2 for peak in per_node.values()), per_node
    assert server.peak_active <= 4
    check_documents(outputs(out), expected)
    check_counts(outcome.work, expected)
    manifest = json.loads(Path(outcome.manifest_path).read_text())
    assert manifest["bytes_in"] == sum(len(body) for body in files.values())


def test_no_language_disappears(two_node_cluster, tmp_path):
    """Ordinary prose in ten languages (GNOME's desktop help, 40 pages each, as web pages)
    through the whole default pipeline, every language allowed.

    Measured: of 40 pages each, kept en 34, de 36, es 30, fr 35, it 37, ja 31, nl 37, pt 33,
    ru 36, zh 35 (the lowest, Spanish, keeps 88% of English's share), every kept page under
    its own language. Every language must keep at least 80% of English's share.
    """
    with gzip.open(PROSE, "rt", encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    language_of = {}
    records = []
    for number, doc in enumerate(docs):
        title, *paragraphs = doc["text"].split("\n")
        url = f"https://help.example/{doc['language']}/{number}"
        records.append(Page(url, html_page(html.escape(title), [html.escape(p) for p in paragraphs],
                                           doc["language"]).encode()))
        language_of[url] = doc["language"]
    directory = tmp_path / "warcs"
    directory.mkdir()
    write_warc(directory / "help.warc.gz", records)
    out = tmp_path / "out"
    pipeline = load_pipeline("commoncrawl", PipelineOptions(str(directory), str(out), input_file_type="warc"))
    assert run_shard_here(pipeline, tmp_path / "ckpt", output_dir=out).status == "completed"
    written = outputs(out)
    total = collections.Counter(language_of.values())
    kept = collections.Counter(language_of[url] for url in written)
    identified = sum(row["language"] == language_of[url] for url, row in written.items())
    shares = {language: kept[language] / total[language] for language in total}
    assert identified >= 0.95 * len(written), "pages were kept under their own language"
    assert all(share >= 0.8 * shares["en"] for share in shares.values()), shares

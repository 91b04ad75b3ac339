"""Per-node download caps on a real 2-node Ray cluster (two raylets on this host)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from curator_array.execution.ray_data import RayDataExecutor
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import Pipeline, default_pipeline
from curator_array.run.shard import run_shard_here
from curator_array.stages.io import FileListWriter
from curator_array.stages.urls import UrlListStage
from tests.conftest import read_records, records_digest
from tests.integration.helper_stages import ProbedDownloadStage, peak_concurrency
from tests.support.fault_server import FaultServer, random_bytes

pytestmark = pytest.mark.ray
MiB = 2**20


@pytest.fixture(scope="module")
def slow_server():
    files = {f"f{i:02d}.bin": random_bytes(200_000, i) for i in range(24)}
    server = FaultServer(files, per_connection_rate=500_000).start()
    yield server, files
    server.stop()


def download_pipeline(tmp_path, server, files, name, **stage_kwargs):
    lists = tmp_path / f"urls-{name}.txt"
    lists.write_text("".join(server.url("ok", f) + "\n" for f in files))
    probe = tmp_path / f"probe-{name}"
    stage = ProbedDownloadStage(str(tmp_path / f"dl-{name}"), str(probe), **stage_kwargs)
    return Pipeline(UrlListStage([lists]), [stage, FileListWriter(tmp_path / f"out-{name}")]), probe


def run_downloads(tmp_path, server, files, name, **stage_kwargs):
    pipeline, probe = download_pipeline(tmp_path, server, files, name, **stage_kwargs)
    server.peak_active = 0
    executor = RayDataExecutor(progress_bars=False)
    run_shard_here(pipeline, tmp_path / f"ckpt-{name}", output_dir=tmp_path / f"out-{name}", executor=executor)
    per_node = {p.name: peak_concurrency(str(p)) for p in probe.iterdir() if p.is_dir()}
    return executor.pool_choices["download"], server.peak_active, per_node


def test_global_cap_two_per_node(two_node_cluster, slow_server, tmp_path):
    server, files = slow_server
    choice, peak, _ = run_downloads(tmp_path, server, files, "global", hard_cap=False)
    assert choice.size == 4
    assert 1 <= peak <= 4


def test_hard_cap_no_node_exceeds_two(two_node_cluster, slow_server, tmp_path):
    server, files = slow_server
    server.gather(4, within_s=60)  # four in flight at once, two a node: the late node's actors find work too
    choice, peak, per_node = run_downloads(tmp_path, server, files, "hard")
    assert choice.size == 4 and peak <= 4
    assert len(per_node) == 2, f"both nodes should download: {per_node}"
    assert all(1 <= p <= 2 for p in per_node.values()), per_node


def test_without_the_cap_downloads_pile_up(two_node_cluster, slow_server, tmp_path):
    server, files = slow_server
    server.gather(5, within_s=60)  # past the cap of 4, whenever the actors of a loaded machine start
    _, peak, _ = run_downloads(tmp_path, server, files, "uncapped", workers_per_node=4, hard_cap=False)
    assert peak > 4, "the probe must be able to see more than the cap"


def test_urls_flow_through_download_read_filter_write(two_node_cluster, tmp_path):
    sources = {f"part-{i}.jsonl": "".join(json.dumps({"id": f"{i}-{j}", "text": f"doc {i} {j} " * (j % 4)}) + "\n"
                                          for j in range(30)).encode() for i in range(5)}
    server = FaultServer(sources).start()
    try:
        lists = tmp_path / "urls.txt"
        lists.write_text("".join(server.url("flaky503", name) + "\n" for name in sources))
        out = tmp_path / "out"
        options = PipelineOptions.of("", str(out), input_urls=(str(lists),), drop_empty=True)
        outcome = run_shard_here(default_pipeline(options), tmp_path / "ckpt", output_dir=out)
        assert outcome.status == "completed"
        expected = [r for body in sources.values() for r in map(json.loads, body.decode().splitlines()) if r["text"].strip()]
        assert records_digest(read_records(out)) == records_digest(expected)
        assert not [p for p in Path(out / ".downloads").iterdir() if p.name.endswith(".part")]
    finally:
        server.stop()


def test_backlog_is_bounded_when_the_consumer_is_slow(two_node_cluster, slow_server, tmp_path):
    import threading

    from tests.integration.helper_stages import SlowConsumer

    server, files = slow_server
    pipeline, _ = download_pipeline(tmp_path, server, files, "backlog")
    pipeline.stages.insert(-1, SlowConsumer())
    download_dir = tmp_path / "dl-backlog"
    stop, peak = threading.Event(), [0]

    def sample():
        while not stop.is_set():
            waiting = [p for p in download_dir.glob("*.bin") if not Path(f"{p}.consumed").exists()] if download_dir.exists() else []
            peak[0] = max(peak[0], len(waiting))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    executor = RayDataExecutor(progress_bars=False)
    outcome = run_shard_here(pipeline, tmp_path / "ckpt-backlog", executor=executor)
    stop.set()
    sampler.join()
    assert outcome.status == "completed"
    assert len(list(download_dir.glob("*.consumed"))) == len(files)
    from curator_array.execution.ray_data import BACKLOG_PER_WORKER

    budget = BACKLOG_PER_WORKER * executor.pool_choices["download"].size
    in_consumer = executor.pool_choices["slow_consumer"].size  # picked up, still being processed
    assert 1 <= peak[0] <= budget + in_consumer, f"{peak[0]} files downloaded but not consumed (budget {budget})"

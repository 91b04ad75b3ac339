"""Per-node worker caps measured on real 1-node and 2-node Ray clusters on this host."""

import time

import pytest
import ray

from curator_array.execution.ray_cluster import NodeOptions, start_worker
from curator_array.execution.ray_data import RayDataExecutor
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import Pipeline
from curator_array.run.shard import run_shard_here
from tests.integration.helper_stages import SleepyStage, peak_concurrency

pytestmark = pytest.mark.ray


def sleepy_pipeline(input_dir, out, probe, **spec):
    options = PipelineOptions(str(input_dir), str(out))
    return Pipeline(options.source(), [options.reader(), SleepyStage(str(probe), **spec), options.writer()])


def run_sleepy(tmp_path, name, input_dir, **spec):
    out, probe = tmp_path / f"out-{name}", tmp_path / f"probe-{name}"
    executor = RayDataExecutor(progress_bars=False)
    outcome = run_shard_here(sleepy_pipeline(input_dir, out, probe, **spec), tmp_path / f"ckpt-{name}", output_dir=out, executor=executor)
    assert outcome.status == "completed"
    return executor.pool_choices["sleepy"], peak_concurrency(str(probe)), probe


def test_one_node_pool_of_two_is_never_exceeded(ray_cluster, sample_jsonl, tmp_path):
    choice, peak, probe = run_sleepy(tmp_path, "capped", sample_jsonl, num_workers_per_node=2)
    assert choice.size == 2
    assert 1 <= peak <= 2
    per_node = {p.name: peak_concurrency(str(p)) for p in probe.iterdir() if p.is_dir()}
    assert list(per_node.values()) == [peak], f"one node, whose probe saw the global peak: {per_node}"
    _, uncapped_peak, _ = run_sleepy(tmp_path, "uncapped", sample_jsonl, num_workers=8)
    assert uncapped_peak > 2, "the probe must be able to see more than the cap"


def test_two_node_pool_of_four(ray_cluster, sample_jsonl, tmp_path):
    worker = start_worker(
        ray_cluster.address, ray_cluster.session_dir, ray_cluster.token_path,
        NodeOptions(num_cpus=8, object_store_memory=200 * 1024 * 1024), log_name="ray-worker-2.log",
    )
    ray_cluster.extra_nodes.append(worker)
    deadline = time.monotonic() + 60
    while sum(n["Alive"] for n in ray.nodes()) < 2:
        assert time.monotonic() < deadline, worker.log_tail()
        time.sleep(0.5)
    choice, peak, probe = run_sleepy(tmp_path, "two-nodes", sample_jsonl, num_workers_per_node=2)
    assert choice.size == 4
    assert 1 <= peak <= 4
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    per_node = {p.name: peak_concurrency(str(p)) for p in probe.iterdir() if p.is_dir()}
    assert set(per_node) == alive, f"SPREAD placement should use both nodes: {per_node}"
    assert all(1 <= node_peak <= 4 for node_peak in per_node.values()), per_node
    assert sum(per_node.values()) >= peak, "the per-node probes saw what the global probe saw"

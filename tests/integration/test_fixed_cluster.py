"""Ray Data on a private cluster runs without its helper actors (autoscaling, stats, actor
locations), to the same outputs."""

import pytest
import ray

from curator_array.execution.clients import RayClient
from curator_array.execution.ray_cluster import NodeOptions
from curator_array.execution.ray_data import RayDataExecutor
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import Pipeline
from curator_array.run.shard import run_shard_here
from tests.conftest import read_records, records_digest
from tests.integration.helper_stages import SetupCountingStage

pytestmark = pytest.mark.ray

HELPERS = {"AutoscalingCoordinator": "AutoscalingCoordinator", "datasets_stats_actor": "_dataset_stats_actor",
           "ActorLocationTracker": "ActorLocationTracker"}


def helper_actors() -> set[str]:
    found = set()
    for name, namespace in HELPERS.items():
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            continue
        found.add(name)
    return found


def copy(sample_jsonl, tmp_path, name, private_cluster):
    out = tmp_path / name
    options = PipelineOptions.of(str(sample_jsonl), str(out), drop_empty=True)
    actors = SetupCountingStage(str(tmp_path / f"probe-{name}"))  # an actor pool: its actors report their node
    pipeline = Pipeline(options.source(), [options.reader(), *options.filters(), actors, options.writer()])
    executor = RayDataExecutor(progress_bars=False, private_cluster=private_cluster)
    outcome = run_shard_here(pipeline, tmp_path / f"ckpt-{name}", output_dir=out, executor=executor)
    assert outcome.status == "completed"
    return records_digest(read_records(out))


def test_a_private_cluster_runs_datasets_without_ray_datas_helper_actors(sample_jsonl, tmp_path):
    """By default the executor asks whether this process drives a cluster one of our clients started."""
    # A cluster of its own: the helpers Ray Data starts are detached and outlive a run.
    with RayClient(node_options=NodeOptions(num_cpus=2, object_store_memory=100 * 2**20)) as owner:
        without = copy(sample_jsonl, tmp_path, "private", private_cluster=None)
        assert helper_actors() == set()
        ray.shutdown()
        with RayClient(address=owner.address):  # the same cluster, as one someone else runs
            with_helpers = copy(sample_jsonl, tmp_path, "shared", private_cluster=None)
            assert helper_actors() == set(HELPERS), "the check must see the helpers Ray Data starts by default"
    assert without == with_helpers

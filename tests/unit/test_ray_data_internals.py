"""What ``without_helper_actors`` changes in Ray Data while a dataset runs on a private cluster,
and that it puts everything back: checked on Ray Data's modules, without a cluster."""

import time

import ray
from ray.data._internal.execution import streaming_executor
from ray.data._internal.execution import streaming_executor_state as executor_state
from ray.data._internal.execution.operators import actor_pool_map_operator as actor_pools

from curator_array.execution.ray_internals.data import OUTPUT_POLL_S, without_helper_actors


def test_the_budget_is_read_from_the_cluster_once_however_often_the_executor_asks(monkeypatch):
    asked = []
    monkeypatch.setattr(ray, "cluster_resources", lambda: asked.append(1) or {"CPU": 2.0, "memory": 2**30})
    with without_helper_actors():
        budget = streaming_executor.create_cluster_autoscaler()
        totals = [budget.get_total_resources() for _ in range(3)]
    assert [total.cpu for total in totals] == [2.0, 2.0, 2.0]
    assert len(asked) == 1, "the executor asks at every step; the cluster never changes"


def test_no_node_drains_and_the_output_queue_is_looked_at_less_often_then_all_is_as_before():
    before = (actor_pools.get_draining_nodes, executor_state.time, streaming_executor.create_cluster_autoscaler)
    with without_helper_actors():
        assert actor_pools.get_draining_nodes() == {}, "only an autoscaler drains nodes"
        began = time.monotonic()
        executor_state.time.sleep(0.001)  # what Ray Data's consumer sleeps between looks
        assert time.monotonic() - began >= OUTPUT_POLL_S
        assert abs(executor_state.time.time() - time.time()) < 1, "the rest of the clock is time's"
    assert (actor_pools.get_draining_nodes, executor_state.time,
            streaming_executor.create_cluster_autoscaler) == before
    with without_helper_actors(enabled=False):
        assert executor_state.time is time

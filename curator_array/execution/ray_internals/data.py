"""Ray Data on a private cluster whose size never changes, without its helper actors.

On first use Ray Data starts an autoscaling coordinator, which asks Ray's autoscaler for
nodes and tells the executor how much of the cluster it may use, and a stats actor, which
gathers metrics for the dashboard; an actor pool adds a location tracker, where its actors
report the node they run on (the pool already learns that from each actor when it starts;
the tracker only notices moves after a restart). The private clusters our clients start
have no autoscaler and no dashboard, and a lost node fails the attempt, so these only cost
start-up: each is one more Python process importing Ray Data on the cores the first tasks
need. On 2 cores a 400 MB JSONL shard took 8.4–9.8 s with the first two and 6.3–7.2 s
without, at 170 MiB less peak memory (bench_pipeline, side by side); the tracker took
1.0–1.4 CPU-seconds of a web chain.

:func:`without_helper_actors` swaps them, while a dataset runs, for a budget read once from
the cluster itself (what the coordinator hands out when nothing else competes), a stats sink
that keeps nothing and a tracker that knows no moves. It also spares the driver two habits
that cost a long run CPU for nothing here: asking the GCS every second which nodes drain
(only an autoscaler drains them) and looking for the next output a hundred times a second
(:class:`_PatientClock`). It reaches into Ray Data's internals,
so on a Ray whose internals differ it changes nothing and says so once (and on a Ray outside
the tested releases it is not tried: ``ray_internals.without_helper_actors``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray

logger = logging.getLogger(__name__)

_warned = False
OUTPUT_POLL_S = 0.05  # the least time between two looks for Ray Data's next output (_PatientClock)


class _NoStats:
    """Stands for Ray Data's stats actor: takes every report, keeps none, names datasets itself."""

    def __getattr__(self, method: str) -> _Report:
        return _Report(method)


class _Report:
    def __init__(self, method: str):
        self.method = method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        if self.method == "gen_dataset_id":
            return ray.put(uuid.uuid4().hex)
        return None


class _NoLocations:
    """Stands for the actor location tracker: actors report to it and nothing is kept, so the
    pool keeps the location each actor gave when it started. Pickled into every actor."""

    update_actor_location = _Report("update_actor_location")


def _whole_cluster_budget(base: type) -> type:
    """A cluster autoscaler (Ray Data's interface ``base``) that never scales and grants every alive node."""
    from ray.data._internal.execution.interfaces import ExecutionResources

    class WholeCluster(base):
        """Read once: the executor asks at every step of its loop, ten times a second, and
        each answer would cost the driver and the GCS two lookups of the node table."""

        def __init__(self) -> None:
            self.total = ExecutionResources.from_resource_dict(ray.cluster_resources())

        def try_trigger_scaling(self) -> None:
            pass

        def on_executor_shutdown(self) -> None:
            pass

        def get_total_resources(self) -> ExecutionResources:
            return self.total

    return WholeCluster


class _PatientClock:
    """The clock of Ray Data's output queue, whose consumer polls it, sleeping 10 ms at a time, until
    an output is there: on a shard of parts that take seconds, a hundred wake-ups a second, which
    cost the driver 12.8 ms of CPU a second (bench_selection); 3.8 ms with ``OUTPUT_POLL_S``
    between looks, which an output may wait at most. Only that wait sleeps in that module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(max(seconds, OUTPUT_POLL_S))


@contextmanager
def without_helper_actors(enabled: bool = True) -> Iterator[None]:
    """While inside, datasets of this process start neither helper actor (see the module)."""
    global _warned
    if not enabled:
        yield
        return
    try:
        from ray.data._internal import stats
        from ray.data._internal.cluster_autoscaler.base_cluster_autoscaler import ClusterAutoscaler
        from ray.data._internal.execution import streaming_executor
        from ray.data._internal.execution import streaming_executor_state as executor_state
        from ray.data._internal.execution.operators import actor_pool_map_operator as actor_pools

        originals = (stats.get_or_create_stats_actor, streaming_executor.create_cluster_autoscaler,
                     actor_pools.get_or_create_actor_location_tracker, actor_pools.get_actor_locations,
                     actor_pools.get_draining_nodes, executor_state.time)
        budget = _whole_cluster_budget(ClusterAutoscaler)
    except (ImportError, AttributeError) as exc:
        if not _warned:
            _warned = True
            logger.info("Ray Data's helper actors start as usual: this Ray Data is not laid out as expected (%s)", exc)
        yield
        return
    stats.get_or_create_stats_actor = _NoStats
    streaming_executor.create_cluster_autoscaler = lambda *args, **kwargs: budget()
    actor_pools.get_or_create_actor_location_tracker = _NoLocations
    actor_pools.get_actor_locations = lambda logical_actor_ids: {}
    actor_pools.get_draining_nodes = dict  # only an autoscaler drains nodes, and ours have none
    executor_state.time = _PatientClock()
    try:
        yield
    finally:
        (stats.get_or_create_stats_actor, streaming_executor.create_cluster_autoscaler,
         actor_pools.get_or_create_actor_location_tracker, actor_pools.get_actor_locations,
         actor_pools.get_draining_nodes, executor_state.time) = originals


# The logger of Ray Data's progress module, which tells whoever turned the bars off how to
# turn them on again: our users turned them off with --no-progress, or never had a terminal.
PROGRESS_NOTICE_LOGGER = "ray.data._internal.progress"


def quiet_progress_notice() -> None:
    """Keep Ray Data's "Progress bars disabled" hint out of the user's log: it names a Ray
    setting that curator-array users do not set (``--progress`` is theirs)."""
    logging.getLogger(PROGRESS_NOTICE_LOGGER).setLevel(logging.ERROR)

import json
import subprocess
import sys

import pytest

from curator_array.core.errors import ConfigError
from curator_array.execution.pools import ClusterShape, choose_pool
from curator_array.stages.base import ProcessingStage, RayStageSpec


def spec(**keys):
    return RayStageSpec.from_mapping("s", keys)


@pytest.mark.parametrize(
    "per_node,nodes,head_works,expected",
    [(2, 1, True, 2), (2, 2, True, 4), (2, 3, False, 4), (0.5, 3, True, 2), (0.1, 1, True, 1), (1.5, 1, False, 2)],
)
def test_per_node_pool_size(per_node, nodes, head_works, expected):
    choice = choose_pool(spec(num_workers_per_node=per_node), 1.0, ClusterShape(nodes, head_works, 8))
    assert choice.size == expected
    assert f"num_workers_per_node={per_node:g}" in choice.describe()
    assert ("head excluded" in choice.reason) == (not head_works)


def test_fixed_and_default_pools():
    assert choose_pool(spec(num_workers=3), 1, ClusterShape(4)).size == 3
    actor = choose_pool(spec(is_actor_stage=True), 2.0, ClusterShape(2, True, 8))
    assert (actor.actor, actor.min_size, actor.max_size, actor.initial_size) == (True, 1, 4, 4)
    few = choose_pool(spec(is_actor_stage=True), 1.0, ClusterShape(1, True, 8), inputs=3)
    assert (few.min_size, few.max_size, few.initial_size) == (1, 8, 3), "no more actors at first than inputs"
    task = choose_pool(spec(), 1, ClusterShape(1))
    assert task.size is None and not task.actor


GiB = 2**30


def test_an_actor_pool_holds_no_more_models_than_each_nodes_memory():
    """Two nodes of 8 CPUs, 5 and 3.5 GiB for workers, actors of 1.3 GiB (an 800 MB model):
    3 + 2 of them, not 16; a node with memory to spare does not lend it to another."""
    shape = ClusterShape(2, True, 16, node_memory=(5 * GiB, 3.5 * GiB))
    choice = choose_pool(spec(is_actor_stage=True), 1.0, shape, memory_per_worker=int(1.3 * GiB))
    assert (choice.max_size, choice.initial_size) == (5, 5)
    assert "memory / 1.30 GiB" in choice.describe()
    roomy = choose_pool(spec(is_actor_stage=True), 1.0, ClusterShape(1, True, 2, node_memory=(20 * GiB,)),
                        memory_per_worker=int(1.3 * GiB))
    assert roomy.max_size == 2 and "cluster CPUs" in roomy.reason


def test_a_worker_no_node_can_hold_is_refused_with_what_it_needs():
    with pytest.raises(ConfigError, match=r"needs 1\.30 GiB .* largest node has 1\.00 GiB .*--mem"):
        choose_pool(spec(is_actor_stage=True), 1.0, ClusterShape(2, True, 8, node_memory=(1 * GiB, 0.5 * GiB)),
                    memory_per_worker=int(1.3 * GiB))


def test_a_model_stage_reserves_its_models_size_per_actor_and_still_runs_with_its_reader(tmp_path):
    from curator_array.classify.model import WORKER_BYTES
    from curator_array.execution.ray_data import chain_stages
    from curator_array.formats.jsonl import JsonlReader
    from curator_array.stages.classifiers import QualityScorer

    model = tmp_path / "m.bin"
    model.write_bytes(b"x" * 3_000_000)
    scorer = QualityScorer({"q": str(model)}, digests={"q": "d"})
    assert scorer.resources.memory_bytes == WORKER_BYTES + 3_000_000
    assert scorer.resources.cpus == 1.0
    reader = JsonlReader()
    assert chain_stages([reader, scorer]) == [[reader, scorer]]


@pytest.mark.parametrize(
    "keys,message",
    [
        ({"num_workers": 2, "num_workers_per_node": 1}, "conflict"),
        ({"num_workers": 0}, "num_workers must be an integer >= 1"),
        ({"num_workers_per_node": -1}, "must be a number > 0"),
        ({"num_worker": 2}, "unknown ray_stage_spec key"),
        ({"is_actor_stage": True, "max_tasks_in_flight_per_actor": 0}, "max_tasks_in_flight_per_actor must be an integer >= 1"),
        ({"is_actor_stage": True, "max_tasks_in_flight_per_actor": 1.5}, "max_tasks_in_flight_per_actor must be"),
    ],
)
def test_bad_specs_are_rejected_when_the_stage_is_built(keys, message):
    class Stage(ProcessingStage):
        ray_stage_spec = keys

        def process(self, task):
            return task

    with pytest.raises(ConfigError, match=message):
        Stage()


# A worker's task allocates through Arrow and frees it; its resident memory before and after the block is handed on.
WORKER_MEMORY_PROBE = r"""
import json
import pyarrow as pa, pyarrow.compute as pc
from curator_array.execution.ray_data import _blocks
from curator_array.stages.tasks import Task

def resident_mib():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20

def tasks():
    column = pa.concat_arrays([pa.array([b"x" * 100] * 1000) for _ in range(500)])
    lengths = pc.binary_length(column)
    del column, lengths
    yield Task("t-0")

blocks = _blocks(tasks())
next(blocks)
held = resident_mib()
next(blocks, None)
print(json.dumps({"held": held, "after": resident_mib()}))
"""


def test_a_worker_hands_back_arrow_memory_its_task_freed():
    """Between tasks a worker does not keep Arrow's freed memory: on a node it counts for the whole run."""
    probe = subprocess.run([sys.executable, "-c", WORKER_MEMORY_PROBE], capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    memory = json.loads(probe.stdout.splitlines()[-1])
    assert memory["held"] - memory["after"] > 30, memory


def test_small_listed_downloads_are_read_several_per_task_and_unsized_ones_one_each(tmp_path):
    """A reader task takes small downloaded objects of known size in bundles (up to 64 MiB,
    within each consumer's share of the download backlog); a crawl's WARCs, of unknown size,
    and large objects stay one per task."""
    from curator_array.execution.ray_data import inputs_per_task
    from curator_array.stages.download import DownloadStage
    from curator_array.stages.urls import UrlGroupTask

    download = DownloadStage(tmp_path)

    def listed(size):
        url = f"s3://b/{size}"
        return UrlGroupTask(url, urls=[url], expected={url: {"size": size}} if size is not None else {})

    assert inputs_per_task(download, [listed(5 << 20)] * 200, backlog=8, consumers=2) == 4
    assert inputs_per_task(download, [listed(5 << 20)] * 200, backlog=32, consumers=2) == 12
    assert inputs_per_task(download, [listed(1 << 30)] * 20, backlog=8, consumers=2) == 1
    assert inputs_per_task(download, [listed(5 << 20), listed(None)], backlog=8, consumers=2) == 1
    assert inputs_per_task(download, [listed(5 << 20)], backlog=1, consumers=2) == 1


def test_a_block_of_source_tasks_holds_no_more_than_a_bundle_of_input_when_their_size_is_known(tmp_path):
    """16 files of 62 MB on 2 CPUs: one per block, so no core waits a whole file at the end;
    200 files of 5 MB keep a few per block (the scheduler's tick), and unknown sizes the old rule."""
    import pyarrow as pa

    from curator_array.execution.ray_data import BUNDLE_BYTES, mean_task_bytes, tasks_per_block
    from curator_array.formats.jsonl import JsonlReader
    from curator_array.stages.partition import FilePartitioningStage

    two_cpus = ClusterShape(1, True, 2)
    reader = JsonlReader()
    assert tasks_per_block(16, two_cpus, reader) == 2
    assert tasks_per_block(16, two_cpus, reader, 62_000_000) == 1
    assert tasks_per_block(200, two_cpus, reader, 5_000_000) == BUNDLE_BYTES // 5_000_000 < 200 // 8
    assert tasks_per_block(48, two_cpus, reader, 8_000_000) == 48 // 8

    rows = pa.table({"path": ["a.jsonl", "b.jsonl", "c.jsonl"], "size": [10, 30, 5], "mtime_ns": [0, 0, 0],
                     "task_id": ["t1", "t1", "t2"]})
    tasks = FilePartitioningStage(str(tmp_path), "jsonl").tasks_from(rows)
    assert [t.metadata["input_bytes"] for t in tasks] == [40, 5]
    assert mean_task_bytes(tasks) == 22

import gzip

import pytest

from curator_array.core.errors import ConfigError
from curator_array.core.plan import plan_shards
from curator_array.core.sharding import ShardRange, shard_of
from curator_array.stages.partition import FilePartitioningStage, group_task_id


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "in put é"
    (root / "b" / "deep").mkdir(parents=True)
    (root / ".hidden").mkdir()
    for rel in ["a.jsonl", "b/c.jsonl", "b/deep/d.jsonl", "z.parquet", "notes.txt", ".tmp.jsonl", ".hidden/x.jsonl"]:
        (root / rel).write_text("{}\n")
    with gzip.open(root / "b" / "e.jsonl.gz", "wt") as fh:
        fh.write("{}\n")
    return root


def test_listing_is_sorted_recursive_and_by_extension(tree):
    stage = FilePartitioningStage(tree, "jsonl")
    assert stage.list_relative_files() == ["a.jsonl", "b/c.jsonl", "b/deep/d.jsonl", "b/e.jsonl.gz"]
    assert FilePartitioningStage(tree, "parquet").list_relative_files() == ["z.parquet"]


def test_groups_and_ids_do_not_depend_on_the_mount_point(tree, tmp_path):
    tasks = FilePartitioningStage(tree, "jsonl", files_per_partition=3).list_tasks()
    assert [t.metadata["relative_files"] for t in tasks] == [
        ["a.jsonl", "b/c.jsonl", "b/deep/d.jsonl"], ["b/e.jsonl.gz"],
    ]
    moved = tmp_path / "elsewhere"
    tree.rename(moved)
    again = FilePartitioningStage(moved, "jsonl", files_per_partition=3).list_tasks()
    assert [t.task_id for t in again] == [t.task_id for t in tasks]
    assert again[0].files[0] == str(moved / "a.jsonl")
    assert tasks[1].task_id == group_task_id(["b/e.jsonl.gz"])
    assert not tasks[0].task_id.startswith("r")


def test_missing_dir_and_bad_options(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        FilePartitioningStage(tmp_path / "nope").list_tasks()
    with pytest.raises(ConfigError, match="not supported"):
        FilePartitioningStage(tmp_path, "csv")
    with pytest.raises(ConfigError, match=">= 1"):
        FilePartitioningStage(tmp_path, "jsonl", 0)


def test_a_dir_without_input_files_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match="no jsonl input files .* the directory is empty"):
        FilePartitioningStage(tmp_path).list_tasks()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.parquet").write_bytes(b"x")
    (tmp_path / ".hidden").write_bytes(b"x")
    with pytest.raises(ConfigError, match="holds 1 other file.*e.g. sub/a.parquet: is --input-file-type right"):
        FilePartitioningStage(tmp_path).list_tasks()


def test_plan_counts_and_imbalance():
    listing = [(f"t{i}", [f"f{i}.jsonl"]) for i in range(40)]
    plan = plan_shards(listing, ShardRange(8, 1))
    expected = {s: 0 for s in range(1, 9)}
    for task_id, _ in listing:
        expected[shard_of(task_id, 8, 1)] += 1
    assert plan.counts == expected
    assert plan.imbalance == pytest.approx(max(expected.values()) / 5)
    assert plan.empty_shards == [s for s, n in expected.items() if n == 0]

"""The frozen listing: one walk per run, then every element reads one file."""

from __future__ import annotations

import json
import os

import pytest

from curator_array.cli import main
from curator_array.core.errors import CheckpointMismatchError
from curator_array.core.layout import CheckpointLayout
from curator_array.core.run_contract import read_run_config
from curator_array.core.sharding import ShardConfig
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import default_pipeline
from curator_array.run.prepare import prepare_shard
from curator_array.stages.listing import load
from curator_array.stages.partition import FilePartitioningStage
from tests.unit.test_sharding import spec_formula


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "in"
    for index in range(40):
        directory = root / f"d{index % 4}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{index:02d}.jsonl").write_text(json.dumps({"text": "x" * index}) + "\n")
    return root


def pipeline(root, tmp_path, **options):
    return default_pipeline(PipelineOptions.of(str(root), str(tmp_path / "out"), **options))


def forbid_walks(monkeypatch):
    def walk(self):
        raise AssertionError("the input tree was walked")

    monkeypatch.setattr(FilePartitioningStage, "_walk", walk)


def test_first_start_freezes_later_ones_only_read(tree, tmp_path, monkeypatch):
    layout = CheckpointLayout(tmp_path / "ckpt")
    first = prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(0, 3))
    run = read_run_config(layout)
    assert run.listing.files == 40 and run.listing.file.startswith("listing-")
    assert (layout.completion_dir / run.listing.file).is_file()
    assert not list(layout.completion_dir.glob("source_tasks-*")), "the listing replaces the id list"
    forbid_walks(monkeypatch)
    owned = [prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(s, 3)).tasks for s in (1, 2)]
    everything = load(layout, run.listing).task_ids
    union = [t.task_id for tasks in (first.tasks, *owned) for t in tasks]
    assert sorted(union) == sorted(everything) and len(set(union)) == 40
    for index, tasks in enumerate((first.tasks, *owned)):
        assert all(spec_formula(t.task_id, 3, 0) == index for t in tasks)
    assert first.tasks[0].files[0].startswith(str(tree)) and first.tasks[0].metadata["relative_files"]


def test_a_changed_own_file_is_caught_without_walking(tree, tmp_path, monkeypatch):
    layout = CheckpointLayout(tmp_path / "ckpt")
    prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(0, 1))
    victim = tree / "d1" / "f05.jsonl"
    victim.write_text(victim.read_text() + '{"text": "more"}\n')
    forbid_walks(monkeypatch)
    with pytest.raises(CheckpointMismatchError, match=r"1 input file\(s\) of this shard changed .*f05.jsonl \(size"):
        prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(0, 1))


def test_relist_accepts_an_unchanged_tree_and_names_changes(tree, tmp_path):
    layout = CheckpointLayout(tmp_path / "ckpt")
    prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(0, 2))
    prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(1, 2), relist=True)
    (tree / "d2" / "extra.jsonl").write_text("{}\n")
    os.utime(tree / "d0" / "f00.jsonl", ns=(1, 1))
    with pytest.raises(CheckpointMismatchError, match=r"1 added \(e.g. d2/extra.jsonl\), 0 removed, 1 changed \(e.g. "
                                                      r"d0/f00.jsonl\)"):
        prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(1, 2), relist=True)


def test_plan_freeze_writes_the_listing_so_no_element_walks(tree, tmp_path, monkeypatch, capsys):
    checkpoint = tmp_path / "ckpt"
    assert main(["plan", "--input-dir", str(tree), "--total-shards", "4", "--freeze", "--checkpoint-path",
                 str(checkpoint)]) == 0
    assert "froze 40 files (40 tasks)" in capsys.readouterr().err
    run = read_run_config(CheckpointLayout(checkpoint))
    assert run.total_shards == 4 and run.pipeline is None and run.listing.files == 40
    forbid_walks(monkeypatch)
    prepared = prepare_shard(pipeline(tree, tmp_path, min_words=1), checkpoint, ShardConfig(2, 4))
    assert read_run_config(CheckpointLayout(checkpoint)).pipeline == prepared.pipeline.fingerprint(), "pinned now"
    assert main(["plan", "--input-dir", str(tree), "--total-shards", "4", "--freeze"]) == 2


def test_a_run_json_from_before_listings_is_walked_once_and_pinned(tree, tmp_path, monkeypatch):
    layout = CheckpointLayout(tmp_path / "ckpt")
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 2}))
    prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(0, 2))
    assert json.loads(layout.run_file.read_text())["listing"]["files"] == 40
    forbid_walks(monkeypatch)
    prepare_shard(pipeline(tree, tmp_path), layout.root, ShardConfig(1, 2))


def test_listing_hashes_follow_the_spec_formula(tree):
    snapshot = FilePartitioningStage(tree, "jsonl", files_per_partition=3).snapshot()
    table = snapshot.table
    assert table.column_names == ["path", "size", "mtime_ns", "task_id", "task_key"]
    assert table.column("path").to_pylist() == sorted(table.column("path").to_pylist())
    ids = snapshot.task_ids
    assert len(ids) == 14 and len(set(ids)) == 14
    for shard in range(5):
        rows = snapshot.rows_of(ShardConfig(shard, 5))
        assert set(rows.column("task_id").to_pylist()) == {t for t in ids if spec_formula(t, 5, 0) == shard}
    assert snapshot.rows_of(ShardConfig(9, 5)).num_rows == 0

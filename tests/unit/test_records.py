"""The checkpoint's typed records: what an earlier curator-array and the reference system
wrote still reads, and nothing read is dropped on the way back to JSON.

``tests/fixtures/checkpoint-0.1.0`` is the metadata of a real run by curator-array 0.1.0
(before records carried a schema version): 3 shards, 0 and 1 complete, shard 2 with a
failed task (a malformed JSONL line) and a stopped attempt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curator_array.cli import main
from curator_array.core.checkpoint import find_attempt_records, scan_completion_manifests
from curator_array.core.errors import CorruptCheckpointError
from curator_array.core.layout import AttemptId, CheckpointLayout
from curator_array.core.records.attempt import AttemptRecord, JobIdentity
from curator_array.core.records.base import SCHEMA_VERSION, RecordError
from curator_array.core.records.run import ListingRef
from curator_array.core.records.shard import CompletionManifest, ShardWork
from curator_array.core.retry import format_retry, plan_retry
from curator_array.core.run_contract import read_run_config
from curator_array.core.sharding import ShardConfig
from curator_array.core.status import collect_status
from curator_array.run.phases import PHASES

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoint-0.1.0"


@pytest.fixture
def old_run(tmp_path) -> CheckpointLayout:
    shutil.copytree(FIXTURE, tmp_path / "ckpt")
    return CheckpointLayout(tmp_path / "ckpt")


def test_a_manifest_of_version_0_1_reads_with_every_field(old_run):
    path = old_run.manifest_path(1)
    original = json.loads(path.read_text())
    manifest = CompletionManifest.read(path)
    assert manifest.schema_version == 1, "no schema_version in the file: the first version"
    assert (manifest.shard_index, manifest.total_shards, manifest.minimum_shard_index) == (1, 3, 0)
    assert manifest.work.rows_in == 126 and manifest.work.rows_out == 105
    assert manifest.work.rows_dropped_by_stage == {"word_count": 21}
    assert manifest.work.output_files == ("fg-b9b0323f9cd8a099fa458b541798d163.jsonl",)
    assert manifest.job.hostname == "vm" and manifest.job.slurm_num_nodes == 1
    assert manifest.timeline_s["prepared"] == pytest.approx(1.826)
    again = manifest.to_json()
    assert again.pop("schema_version") == 1
    assert again == original, "reading and writing back loses or changes nothing"


def test_a_reference_system_manifest_counts_as_complete(tmp_path):
    layout = CheckpointLayout(tmp_path)
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 3}))
    spec_only = {"minimum_shard_index": 0, "shard_index": 1, "status": "completed", "total_shards": 3}
    layout.manifest_path(1).write_text(json.dumps(spec_only))
    manifest = CompletionManifest.read(layout.manifest_path(1))
    assert manifest.work == ShardWork() and manifest.job == JobIdentity() and manifest.run_id is None
    assert plan_retry(layout).incomplete == (0, 2)
    assert collect_status(layout, PHASES.plan_of).completed == [1]


def test_unknown_fields_are_kept(tmp_path):
    payload = {**CompletionManifest.of(ShardConfig(0, 1)).to_json(), "written_by_a_newer_tool": {"x": 1}}
    manifest = CompletionManifest.from_json(payload)
    assert manifest.extra == {"written_by_a_newer_tool": {"x": 1}}
    assert manifest.to_json() == payload


@pytest.mark.parametrize("change, message", [
    ({"status": "running"}, "status is 'running', not 'completed'"),
    ({"shard_index": "1"}, "field 'shard_index' must be an integer, got '1'"),
    ({"total_shards": None}, "field 'total_shards' must be an integer, got None"),
    ({"minimum_shard_index": True}, "field 'minimum_shard_index' must be an integer, got True"),
])
def test_a_bad_spec_field_is_an_error_naming_it(change, message):
    payload = {**CompletionManifest.of(ShardConfig(1, 3)).to_json(), **change}
    with pytest.raises(RecordError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CompletionManifest.from_json(payload)


def test_measured_fields_of_the_wrong_type_fall_back_to_defaults():
    payload = {**CompletionManifest.of(ShardConfig(1, 3)).to_json(), "rows_in": "many", "hostnames": "n1"}
    manifest = CompletionManifest.from_json(payload)
    assert manifest.work.rows_in == 0 and manifest.hostnames == ()


def test_a_new_manifest_carries_the_schema_version(tmp_path):
    path = CompletionManifest.of(ShardConfig(0, 2), work=ShardWork.of(rows_in=3)).write(CheckpointLayout(tmp_path))
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


def test_attempt_records_of_version_0_1_read(old_run):
    found = {f.path.name: f.record for f in find_attempt_records(old_run)}
    failed, stopped = found["failed_tasks.json"], found["attempt_error.json"]
    assert failed.schema_version == 1 and failed.shard_index == 2 and failed.error is None
    assert [(t.task_id, t.stage) for t in failed.failed_tasks] == [("fg-1c0c6fd90d007b1c0b3ccd99cc285603",
                                                                     "jsonl_reader")]
    assert "line 2: malformed JSON record" in failed.failed_tasks[0].reason
    assert stopped.error_type == "ShardStopped" and stopped.job.slurm_restart_count == 1
    assert stopped.job.slurm_node_name == "node2" and stopped.file_name == "attempt_error.json"


def test_attempt_records_round_trip(old_run):
    for found in find_attempt_records(old_run):
        original = json.loads(found.path.read_text())
        again = found.record.to_json()
        assert again.pop("schema_version") == 1
        assert again == original


def test_an_unreadable_attempt_record_is_reported_not_fatal(old_run):
    bad = old_run.failed_tasks_root / "slurm_job_9" / "shard_0" / "failed_tasks.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{")
    found = [f for f in find_attempt_records(old_run) if f.record is None]
    assert len(found) == 1 and "not valid JSON" in found[0].unreadable


def test_run_json_of_version_0_1_reads_with_its_listing(old_run):
    run = read_run_config(old_run)
    assert run.total_shards == 3 and run.run_id == "2dbaa091277249b7"
    assert run.listing == ListingRef("listing-5a94c3d5174dfb0d.parquet",
                                     "5a94c3d5174dfb0dce009a11280afccfc2b9924bffa18c99e923ae4bf8b285d8", 3, 119192)
    assert run.pipeline["stages"][1]["params"] == {"max_words": None, "min_words": 3, "text_field": "text"}


def test_status_retry_and_report_read_an_old_checkpoint(old_run, tmp_path, capsys):
    assert format_retry(plan_retry(old_run)) == "2\n"
    status = collect_status(old_run, PHASES.plan_of, keep_manifests=True)
    assert status.completed == [0, 1] and status.totals.rows_in == sum(
        m.work.rows_in for m in status.manifests.values())
    assert sorted(a.reason.split(":")[0] for a in status.failed_attempts) == ["1 failed task(s) (first", "ended early"]
    assert main(["status", "--checkpoint-path", str(old_run.root)]) == 0
    assert "complete     2/3" in capsys.readouterr().out
    assert main(["report", "--checkpoint-path", str(old_run.root), "-o", str(tmp_path / "r.html")]) == 0
    assert "jsonl_reader" in (tmp_path / "r.html").read_text()


def test_a_foreign_manifest_is_named(old_run):
    CompletionManifest.of(ShardConfig(2, 5)).write(old_run)
    with pytest.raises(CorruptCheckpointError, match="completed_slurm_array_2.json: written for total_shards=5"):
        scan_completion_manifests(old_run, read_run_config(old_run))


def test_a_new_attempt_record_carries_the_schema_version(tmp_path):
    attempt = AttemptId(("local_attempt_x",))
    record = AttemptRecord.of(attempt, ShardConfig(0, 1), JobIdentity(hostname="h"), error=RuntimeError("boom"))
    path = record.write(CheckpointLayout(tmp_path), attempt)
    payload = json.loads(path.read_text())
    assert payload["schema_version"] == SCHEMA_VERSION and payload["error"] == "boom"
    assert path.name == "attempt_error.json" and AttemptRecord.read(path) == record.__class__.from_json(payload)

import json
import multiprocessing
import os
import signal

import pytest

from curator_array.core import run_contract as ckpt
from curator_array.core.errors import CheckpointMismatchError, ConfigError, CorruptCheckpointError
from curator_array.core.layout import CheckpointLayout
from curator_array.core.records.attempt import AttemptRecord, FailedTaskRecord
from curator_array.core.records.shard import CompletionManifest, ShardWork
from curator_array.core.run_contract import ensure_run_config, read_run_config
from curator_array.core.sharding import ShardConfig, ShardRange
from curator_array.slurm.jobenv import JobEnvironment

IDS = [f"t{i:04d}" for i in range(50)]


def test_layout_matches_the_spec(tmp_path):
    layout = CheckpointLayout(tmp_path)
    ensure_run_config(layout, ShardRange(4), IDS)
    run_file = tmp_path / ".nemo_curator_metadata" / ".slurm_array_completion" / "run.json"
    payload = json.loads(run_file.read_text())
    assert payload["minimum_shard_index"] == 0 and payload["total_shards"] == 4
    assert payload["source_task_count"] == 50
    assert payload["source_task_digest"] == ckpt.source_digest(IDS)
    path = CompletionManifest.of(ShardConfig(3, 4), work=ShardWork.of(source_tasks=5)).write(layout)
    assert path.parent == run_file.parent
    assert path.name.startswith("completed_slurm_array_") and path.name.endswith(".json")
    manifest = json.loads(path.read_text())
    assert {k: manifest[k] for k in ("minimum_shard_index", "shard_index", "status", "total_shards")} == {
        "minimum_shard_index": 0, "shard_index": 3, "status": "completed", "total_shards": 4,
    }


def test_second_attempt_with_same_config_validates(tmp_path):
    layout = CheckpointLayout(tmp_path)
    first = ensure_run_config(layout, ShardRange(4), IDS)
    again = ensure_run_config(layout, ShardRange(4), list(reversed(IDS)))
    assert first.source_task_digest == again.source_task_digest


def test_different_shard_config_is_refused_with_what_differs(tmp_path):
    layout = CheckpointLayout(tmp_path)
    ensure_run_config(layout, ShardRange(4), IDS)
    with pytest.raises(CheckpointMismatchError) as err:
        ensure_run_config(layout, ShardRange(5, 1), IDS)
    message = str(err.value)
    assert "total_shards=5 (the run has 4)" in message
    assert "minimum_shard_index=1 (the run has 0)" in message
    assert "new checkpoint path" in message


def test_changed_listing_is_refused_with_counts(tmp_path):
    layout = CheckpointLayout(tmp_path)
    ensure_run_config(layout, ShardRange(4), IDS)
    changed = IDS[3:] + ["t9001", "t9002"]
    with pytest.raises(CheckpointMismatchError, match=r"2 id\(s\) added, 3 removed") as err:
        ensure_run_config(layout, ShardRange(4), changed)
    assert "t9001" in str(err.value) and "t0000" in str(err.value)


def test_run_json_of_another_tool_without_digest_is_accepted(tmp_path):
    layout = CheckpointLayout(tmp_path)
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 4}))
    assert ensure_run_config(layout, ShardRange(4), IDS).total_shards == 4


def test_missing_and_corrupt_run_json(tmp_path):
    layout = CheckpointLayout(tmp_path)
    with pytest.raises(ConfigError, match="no run configuration"):
        read_run_config(layout)
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text("{not json")
    with pytest.raises(CorruptCheckpointError, match="run.json: not valid JSON"):
        read_run_config(layout)


def _race(args):
    root, total, barrier, results = args
    barrier.wait()
    try:
        ensure_run_config(CheckpointLayout(root), ShardRange(total), IDS)
        results.put(("ok", total))
    except CheckpointMismatchError as exc:
        results.put(("mismatch", str(exc)))


def _run_race(root, totals):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(totals))
    results = ctx.Queue()
    procs = [ctx.Process(target=_race, args=((root, t, barrier, results),)) for t in totals]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return outcomes


def test_32_processes_racing_with_one_config_all_succeed(tmp_path):
    outcomes = _run_race(str(tmp_path), [4] * 32)
    assert outcomes == [("ok", 4)] * 32
    files = os.listdir(CheckpointLayout(tmp_path).completion_dir)
    assert files.count("run.json") == 1
    assert not [f for f in files if ".tmp-" in f]
    assert json.loads(CheckpointLayout(tmp_path).run_file.read_text())["total_shards"] == 4


def test_32_processes_racing_with_two_configs_one_wins(tmp_path):
    outcomes = _run_race(str(tmp_path), [4, 5] * 16)
    winner = read_run_config(CheckpointLayout(tmp_path)).total_shards
    loser = 5 if winner == 4 else 4
    assert sorted(o for o in outcomes if o[0] == "ok") == [("ok", winner)] * 16
    mismatches = [o[1] for o in outcomes if o[0] == "mismatch"]
    assert len(mismatches) == 16
    assert all(f"total_shards={loser} (the run has {winner})" in m for m in mismatches)


def _killed_writer(root):
    real_link = os.link

    def link_then_die(src, dst):
        if str(dst).endswith("run.json"):
            os.kill(os.getpid(), signal.SIGKILL)
        real_link(src, dst)

    os.link = link_then_die
    ensure_run_config(CheckpointLayout(root), ShardRange(4), IDS)


def test_writer_killed_after_its_temp_file_leaves_no_partial_run_json(tmp_path):
    proc = multiprocessing.get_context("fork").Process(target=_killed_writer, args=(str(tmp_path),))
    proc.start()
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    layout = CheckpointLayout(tmp_path)
    assert not layout.run_file.exists()
    leftovers = [f for f in os.listdir(layout.completion_dir) if "run.json.tmp-" in f]
    assert leftovers, "the killed writer had written its temp file"
    ensure_run_config(layout, ShardRange(4), IDS)
    assert read_run_config(layout).total_shards == 4


def test_attempt_dirs_are_distinct_per_job_restart_and_local_run(tmp_path):
    layout = CheckpointLayout(tmp_path)
    shard = ShardConfig(7, 10)
    first = JobEnvironment.from_env({"SLURM_JOB_ID": "101", "SLURM_ARRAY_TASK_ID": "7"}, hostname="n1")
    requeued = JobEnvironment.from_env(
        {"SLURM_JOB_ID": "101", "SLURM_ARRAY_TASK_ID": "7", "SLURM_RESTART_COUNT": "1"}, hostname="n1"
    )
    failed = (FailedTaskRecord("t1", reason="x"),)
    paths = [
        AttemptRecord.of(job.attempt_id(), shard, job.identity(), failed_tasks=failed).write(layout, job.attempt_id())
        for job in (first, requeued)
    ]
    local = JobEnvironment.from_env({}, hostname="laptop")
    attempt = local.attempt_id("abc")
    paths.append(AttemptRecord.of(attempt, shard, local.identity()).write(layout, attempt))
    rel = [p.relative_to(layout.failed_tasks_root).as_posix() for p in paths]
    assert rel == [
        "slurm_job_101/array_task_7/restart_0/shard_7/failed_tasks.json",
        "slurm_job_101/array_task_7/restart_1/shard_7/failed_tasks.json",
        "local_attempt_abc/shard_7/failed_tasks.json",
    ]
    record = json.loads(paths[1].read_text())
    assert record["failed_tasks"] == [{"task_id": "t1", "stage": "", "reason": "x"}]
    assert record["job"]["slurm_restart_count"] == 1


def test_local_attempt_ids_differ_between_processes():
    job = JobEnvironment.from_env({}, hostname="h")
    assert str(job.attempt_id()).startswith("local_attempt_")
    assert f"-{os.getpid()}" in str(job.attempt_id())


def test_job_environment_errors_name_the_variable():
    with pytest.raises(ConfigError, match="SLURM_RESTART_COUNT='x' is not an integer"):
        JobEnvironment.from_env({"SLURM_RESTART_COUNT": "x"})
    with pytest.raises(ConfigError, match="SLURM_NODEID=2 is not below"):
        JobEnvironment.from_env({"SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "2"})

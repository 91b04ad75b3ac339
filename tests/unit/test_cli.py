import json

import pytest

from curator_array.cli import main
from curator_array.core.layout import CheckpointLayout
from curator_array.core.records.attempt import AttemptRecord, FailedTaskRecord
from curator_array.core.records.shard import CompletionManifest, ShardWork
from curator_array.core.sharding import ShardConfig
from curator_array.slurm.jobenv import JobEnvironment


def one_row_manifest(shard: int) -> CompletionManifest:
    return CompletionManifest.of(ShardConfig(shard, 6), work=ShardWork.of(source_tasks=1, rows_in=1, rows_out=1,
                                                                       output_file_count=1))


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def checkpoint(tmp_path):
    layout = CheckpointLayout(tmp_path / "ckpt")
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 6, "source_task_count": 30}))
    for shard in (0, 1, 4):
        CompletionManifest.of(ShardConfig(shard, 6), work=ShardWork.of(source_tasks=5, rows_in=100, rows_out=90,
                              output_file_count=5), duration_s=2.0 + shard).write(layout)
    job = JobEnvironment.from_env({"SLURM_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "3"}, hostname="n")
    failed = (FailedTaskRecord("x", reason="boom"),)
    AttemptRecord.of(job.attempt_id(), ShardConfig(3, 6), job.identity(), failed_tasks=failed).write(layout, job.attempt_id())
    layout.submissions_file.write_text("")  # a run queued by submit
    return layout


def test_retry_formats(capsys, checkpoint):
    assert run_cli(capsys, "retry", "--checkpoint-path", str(checkpoint.root)) == (0, "2-3,5\n", "")
    code, out, _ = run_cli(capsys, "retry", "--checkpoint-path", str(checkpoint.root), "--format", "fields",
                           "--max-array-size", "4")
    assert (code, out) == (0, "2-3 0 0 6\n1 4 0 6\n")


def test_retry_reads_checkpoint_path_from_env(capsys, checkpoint, monkeypatch):
    monkeypatch.setenv("CHECKPOINT_PATH", str(checkpoint.root))
    assert run_cli(capsys, "retry")[1] == "2-3,5\n"


def test_errors_are_one_line_with_exit_codes(capsys, tmp_path, checkpoint):
    code, out, err = run_cli(capsys, "retry", "--checkpoint-path", str(tmp_path / "missing"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "no run configuration" in err
    code, _, err = run_cli(capsys, "retry", "--checkpoint-path", str(checkpoint.root), "--max-array-size", "3")
    assert code == 2 and "needs --format fields" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "retry", "--checkpoint-path", str(checkpoint.root), "--format", "fields",
                           "--max-array-size", "many")
    assert code == 2 and "use a number, 'auto' or 'none'" in err and "unexpected" not in err
    code, _, err = run_cli(capsys, "retry", "--checkpoint-path", str(checkpoint.root), "--format", "xml")
    assert code == 2 and err.count("\n") == 1 and "--help" in err
    (checkpoint.completion_dir / "completed_slurm_array_9.json").write_text("{")
    code, _, err = run_cli(capsys, "retry", "--checkpoint-path", str(checkpoint.root))
    assert code == 1 and "completed_slurm_array_9.json" in err and "Traceback" not in err


def test_status_text_and_json(capsys, checkpoint):
    code, out, _ = run_cli(capsys, "status", "--checkpoint-path", str(checkpoint.root))
    assert code == 0
    assert "complete     3/6" in out and "unfinished   shards 2-3,5" in out
    assert "slurm_job_77/array_task_3/restart_0/shard_3/failed_tasks.json" in out
    code, out, _ = run_cli(capsys, "status", "--checkpoint-path", str(checkpoint.root), "--json")
    data = json.loads(out)
    assert data["completed_count"] == 3 and data["incomplete"] == "2-3,5"
    assert data["totals"] == {"source_tasks": 15, "rows_in": 300, "rows_out": 270, "output_file_count": 15}
    assert data["duration_s"] == {"min": 2.0, "mean": pytest.approx(11 / 3), "max": 6.0}
    assert data["failed_attempts"][0]["failed_task_count"] == 1
    assert data["failed_attempts"][0]["shard_completed_later"] is False


def test_status_shows_why_an_attempt_stopped(capsys, checkpoint):
    job = JobEnvironment.from_env({"SLURM_JOB_ID": "78", "SLURM_ARRAY_TASK_ID": "0", "SLURM_RESTART_COUNT": "1"}, hostname="n")
    record = AttemptRecord.of(job.attempt_id(), ShardConfig(0, 6), job.identity(), error=RuntimeError("node n2 died"))
    record.write(checkpoint, job.attempt_id())
    (checkpoint.failed_tasks_root / "slurm_job_1" / "shard_5").mkdir(parents=True)
    (checkpoint.failed_tasks_root / "slurm_job_1" / "shard_5" / "failed_tasks.json").write_text("{")
    code, out, _ = run_cli(capsys, "status", "--checkpoint-path", str(checkpoint.root))
    assert code == 0 and "failed attempts (3):" in out
    assert "shard 0: ended early: node n2 died (shard completed later)" in out
    assert "slurm_job_78/array_task_0/restart_1/shard_0/attempt_error.json" in out
    assert "shard None: unreadable record (" in out
    data = json.loads(run_cli(capsys, "status", "--checkpoint-path", str(checkpoint.root), "--json")[1])
    errors = {a["shard_index"]: a["error"] for a in data["failed_attempts"]}
    assert errors[0] == "node n2 died" and errors[3] is None


def test_plan_json(capsys, tmp_path):
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        (tmp_path / name).write_text("{}\n")
    code, out, _ = run_cli(capsys, "plan", "--input-dir", str(tmp_path), "--total-shards", "2",
                           "--minimum-shard-index", "3", "--json")
    data = json.loads(out)
    assert code == 0 and data["total_shards"] == 2 and data["minimum_shard_index"] == 3
    assert [t["files"] for t in data["tasks"]] == [["a.jsonl"], ["b.jsonl"], ["c.jsonl"]]
    assert all(t["shard"] in (3, 4) for t in data["tasks"])
    code, out, _ = run_cli(capsys, "plan", "--input-dir", str(tmp_path), "--total-shards", "2")
    assert "3 source tasks over 2 shards" in out


def test_every_command_has_help_with_examples(capsys):
    from curator_array.cli import cli

    assert len(cli.commands) >= 6
    for command in sorted(cli.commands):
        code, out, _ = run_cli(capsys, command, "--help")
        assert code == 0 and "Examples:" in out, f"{command} --help has no examples"


def test_watch_refreshes_until_complete_or_nothing_is_queued(checkpoint):
    from curator_array.cli.status_view import watch
    from curator_array.core.status import collect_status
    from curator_array.run.phases import PHASES

    queued = {2: "RUNNING", 3: "PENDING", 5: "RUNNING"}
    frames, sleeps = [], []

    def collect():
        status = collect_status(checkpoint, PHASES.plan_of)
        status.queued = {None: dict(queued)}
        return status

    def sleep(seconds):
        sleeps.append(seconds)
        shard = 2 if 2 in queued else 5  # a running shard finishes at each refresh
        one_row_manifest(shard).write(checkpoint)
        del queued[shard]
        if shard == 5:
            del queued[3]  # cancelled while pending

    code = watch(collect, frames.append, sleep, lambda: "12:00:00", 5, clear=False)
    assert code == 3 and sleeps == [5, 5]
    assert frames[0].splitlines()[1] == "3/6 complete: complete 3, running 2, pending 1, failed 0, waiting 0"
    assert "  running 2,5" in frames[0] and "  pending 3" in frames[0]
    assert frames[-2].splitlines()[1] == "5/6 complete: complete 5, running 0, pending 0, failed 1, waiting 0"
    assert "shard 3: 1 failed task(s)" in frames[-2]
    assert "nothing of this run is queued any more; 1 shard(s) incomplete" in frames[-1]
    queued.clear()
    one_row_manifest(3).write(checkpoint)
    one_row_manifest(5).write(checkpoint)
    assert watch(collect, frames.append, sleep, lambda: "12:00:01", 5, clear=True) == 0
    assert frames[-2].startswith("\x1b[H\x1b[2J") and frames[-1] == "every shard is complete\n"


def test_a_run_that_was_never_submitted_is_not_sent_to_slurm(checkpoint, capsys):
    """Advice fits where the run is: a run started by hand is started again by hand."""
    from curator_array.cli.status_view import watch
    from curator_array.core.status import collect_status
    from curator_array.run.phases import PHASES

    checkpoint.submissions_file.unlink()
    code, out, err = run_cli(capsys, "retry", "--checkpoint-path", str(checkpoint.root))
    assert (code, out) == (0, "2-3,5\n") and "never submitted: run the same `curator-array run` command again" in err
    frames = []
    for submitted in (False, True):
        if submitted:
            checkpoint.submissions_file.write_text("")
        assert watch(lambda: collect_status(checkpoint, PHASES.plan_of), frames.append, lambda s: None,
                     lambda: "now", 5, clear=False) == 3
        assert ("--submit --site <site>" in frames[-1]) == submitted, frames[-1]
        assert ("this run was never submitted: run the same command again, finished tasks are kept" in frames[-1]) \
            != submitted

"""Records of finished tasks: written as tasks finish, trusted only when intact."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from curator_array.core.atomic import KeptOpen, NewFile
from curator_array.core.layout import AttemptId, CheckpointLayout
from curator_array.core.sharding import ShardConfig
from curator_array.core.task_records import (
    PartRecord,
    PartRecordLog,
    RecordHeader,
    TaskRecord,
    count_done,
    file_check,
    finished_task,
    read_shard_records,
    start_task_records,
    verify,
)
from curator_array.run.recording import TaskCompletion
from curator_array.stages.tasks import FailedTask, TaskCounters, WrittenFiles
from curator_array.storage.places import LocalPlace

SHARD = ShardConfig(3, 8)


def header(attempt: str, run_id: str = "run-1", shard: ShardConfig = SHARD, tasks: int = 10) -> RecordHeader:
    return RecordHeader(run_id, shard.shard_index, shard.total_shards, shard.minimum_shard_index, attempt, tasks)


def worker_records(layout: CheckpointLayout, attempt: AttemptId, head: RecordHeader, *tasks: TaskRecord) -> PartRecordLog:
    """What a worker records for ``tasks``, each written whole (its part 0, final)."""
    log = PartRecordLog(start_task_records(layout, attempt, head))
    for task in tasks:
        log.append(PartRecord(0, True, task))
    return log


def output(root: Path, name: str, data: bytes) -> tuple[str, int, int]:
    (root / name).write_bytes(data)
    return name, len(data), zlib.crc32(data)


def test_file_check_is_size_and_crc32(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 3_000_000)
    assert file_check(path) == (3_000_000, zlib.crc32(b"x" * 3_000_000))


def test_a_new_file_knows_its_check_without_reading_itself_back_and_never_replaces_a_file(tmp_path):
    path, data = tmp_path / "f", bytes(range(256)) * 9000  # more than the 1 MiB buffer
    with NewFile(path) as handle:
        handle.write(data[:1000])
        handle.write(memoryview(data)[1000:])
        assert handle.tell() == len(data)
    assert handle.check == file_check(path) == (len(data), zlib.crc32(data))
    with pytest.raises(FileExistsError):
        NewFile(path)
    assert file_check(path) == handle.check


def test_files_kept_open_are_opened_once_and_the_oldest_closed_past_the_limit(tmp_path):
    kept = KeptOpen(os.O_WRONLY | os.O_CREAT | os.O_APPEND, limit=2)
    first, opened = kept.fd(tmp_path / "a")
    assert opened and kept.fd(tmp_path / "a") == (first, False)
    kept.fd(tmp_path / "b")
    kept.fd(tmp_path / "a")  # used last: b is now the oldest
    kept.fd(tmp_path / "c")
    assert kept.fd(tmp_path / "a") == (first, False) and kept.fd(tmp_path / "b")[1], "b was closed, a kept"
    os.write(first, b"still open\n")
    assert (tmp_path / "a").read_bytes() == b"still open\n"


def test_records_of_every_attempt_are_read_back_and_a_cut_line_is_ignored(tmp_path):
    layout = CheckpointLayout(tmp_path)
    first, second = AttemptId(("slurm_job_1", "array_task_3", "restart_0")), AttemptId(("local_attempt_x",))
    worker_records(layout, first, header(str(first)), TaskRecord("a", (("a.jsonl", 3, 7),), 10, 8, 100, {"word_count": 2}),
           TaskRecord("b", (("b.jsonl", 4, 9), ("shared/b.index", 1, 2)), 5, 5, 50))
    log = worker_records(layout, second, header(str(second)))
    log.append(PartRecord(1, True, TaskRecord("c", (("c.part-00001.jsonl", 2, 2),), 1, 1, 0, {"word_count": 1})))
    log.path.with_name("node2-7-abcd.jsonl").write_text("".join(  # another worker, on another node
        part.to_line() + "\n" for part in (
            PartRecord(0, False, TaskRecord("c", (("c.part-00000.jsonl", 1, 1),), 2, 2, 30, {"word_count": 3})),
            PartRecord(0, False, TaskRecord("e", (("e.part-00000.jsonl", 1, 1),), 2, 2, 30)))))
    with open(log.path, "a") as handle:
        handle.write('{"t":"d","f":[["d.jsonl",1')  # the worker was killed mid-line
    found = read_shard_records(layout, SHARD, "run-1")
    assert sorted(found.tasks) == ["a", "b", "c"] and found.ignored == [], "e's final part and d are not on record"
    assert found.tasks["a"].dropped == {"word_count": 2} and found.tasks["a"].attempt == str(first)
    assert found.tasks["c"] == TaskRecord("c", (("c.part-00000.jsonl", 1, 1), ("c.part-00001.jsonl", 2, 2)), 3, 3, 30,
                                          {"word_count": 4}, {}, str(second))
    assert found.tasks["b"].files == (("b.jsonl", 4, 9), ("shared/b.index", 1, 2))
    assert sorted(found.attempts) == sorted([str(first), str(second)]) and found.shard_tasks == 10
    assert count_done(layout, 3) == (3, 10, 2)


def test_records_of_another_run_or_shard_are_never_used(tmp_path):
    layout = CheckpointLayout(tmp_path)
    for attempt, head in (("old", header("old", run_id="run-0")), ("wide", header("wide", shard=ShardConfig(3, 9)))):
        worker_records(layout, AttemptId((attempt,)), head, TaskRecord("a", (), 1, 1, 1))
    found = read_shard_records(layout, SHARD, "run-1")
    assert found.tasks == {}
    assert sorted(found.ignored) == ["old.jsonl: written for run run-0, not run run-1",
                                     "wide.jsonl: written for shard 3 of 9 (minimum 0), not logical shard 3 of 8 "
                                     "(range 0..7)"]


def test_only_intact_outputs_are_trusted(tmp_path):
    good = TaskRecord("good", (output(tmp_path, "good.jsonl", b"hello\n"),))
    gone = TaskRecord("gone", (output(tmp_path, "gone.jsonl", b"hello\n"),))
    cut = TaskRecord("cut", (output(tmp_path, "cut.jsonl", b"hello\n"),))
    changed = TaskRecord("changed", (output(tmp_path, "changed.jsonl", b"hello\n"),))
    (tmp_path / "gone.jsonl").unlink()
    (tmp_path / "cut.jsonl").write_bytes(b"hel")
    (tmp_path / "changed.jsonl").write_bytes(b"jello\n")
    trusted, untrusted = verify([good, gone, cut, changed], LocalPlace(tmp_path).problem)
    assert list(trusted) == ["good"]
    assert untrusted == {"gone": "gone.jsonl is missing", "cut": "cut.jsonl has 3 bytes, 6 were written",
                         "changed": "changed.jsonl changed since it was written (checksum)"}


def written(task_id: str, path: Path, part: int | None = None, final: bool = True, rows: int = 2) -> WrittenFiles:
    path.write_bytes(b"x" * rows)
    return WrittenFiles(task_id, {}, TaskCounters(rows_read=rows + 1, bytes_read=10), files=[str(path)],
                        rows_written=rows, part=part, final=final)


def test_a_task_is_finished_when_its_final_part_and_all_before_it_are_written(tmp_path):
    completion = TaskCompletion(tmp_path, "attempt-1")
    assert completion.add(written("t", tmp_path / "t.part-00002.jsonl", 2, final=True)) is None
    assert completion.add(written("t", tmp_path / "t.part-00000.jsonl", 0, final=False)) is None
    record = completion.add(written("t", tmp_path / "t.part-00001.jsonl", 1, final=False))
    assert record is not None and [f[0] for f in record.files] == [f"t.part-0000{i}.jsonl" for i in range(3)]
    assert (record.rows_in, record.rows_out, record.bytes_in, record.attempt) == (9, 6, 30, "attempt-1")
    whole = completion.add(written("w", tmp_path / "w.jsonl"))
    assert whole is not None and whole.files == (("w.jsonl", 2, zlib.crc32(b"xx")),)


def test_a_task_with_a_failed_part_is_never_recorded(tmp_path):
    completion = TaskCompletion(tmp_path, "attempt-1")
    assert completion.add(written("t", tmp_path / "t.part-00000.jsonl", 0, final=False)) is None
    assert completion.add(FailedTask("t", reason="boom", stage="extract")) is None
    assert completion.add(written("t", tmp_path / "t.part-00001.jsonl", 1, final=True)) is None
    assert completion.records == {}


def test_a_record_line_of_a_100000_task_shard_stays_small():
    """About 180 bytes for a one-file task with three filters: 18 MB for 100,000 tasks."""
    record = TaskRecord("fg-" + "0" * 32, ((f"fg-{'0' * 32}.parquet", 123_456_789, 4_000_000_000),), 12_345, 9_876,
                        45_678_901, {"non_empty_text": 12, "word_count": 345, "exact_dedup": 6}, attempt="a")
    line = PartRecord(0, True, record).to_line()
    assert len(line) + 1 <= 182
    assert PartRecord.from_line(line, "a") == PartRecord(0, True, record)


def test_status_and_report_show_partial_shards_and_resumed_work(tmp_path, capsys):
    import json

    from curator_array.cli import main
    from curator_array.core.records.shard import AttemptShare, CompletionManifest, ShardWork
    from curator_array.core.run_contract import ensure_run_config
    from curator_array.core.sharding import ShardRange

    layout = CheckpointLayout(tmp_path / "ckpt")
    run = ensure_run_config(layout, ShardRange(8), [f"t{i}" for i in range(16)])
    shares = (AttemptShare("slurm_job_1/array_task_0/restart_0", 3, 30, 20),
              AttemptShare("slurm_job_2/array_task_0/restart_0", 1, 10, 5))
    CompletionManifest.of(ShardConfig(0, 8), run_id=run.run_id, work=ShardWork.of(source_tasks=4),
                          attempt="slurm_job_2/array_task_0/restart_0", attempts=shares).write(layout)
    for attempt, tasks in (("a1", ["x", "y"]), ("a2", ["y", "z"])):
        worker_records(layout, AttemptId((attempt,)), header(attempt, run_id=run.run_id, tasks=5),
               *(TaskRecord(task, ()) for task in tasks))
    assert main(["status", "--checkpoint-path", str(layout.root)]) == 0
    out = capsys.readouterr().out
    assert "  shard 3: 3/5 tasks done in 2 attempt(s)" in out
    assert "resumed      3 task(s) of complete shards were kept from earlier attempts" in out
    assert main(["status", "--checkpoint-path", str(layout.root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["partial"] == {"3": {"tasks_done": 3, "tasks": 5, "attempts": 2}} and data["resumed_tasks"] == 3
    report = tmp_path / "report.html"
    assert main(["report", "--checkpoint-path", str(layout.root), "-o", str(report)]) == 0
    page = report.read_text()
    assert "3 of the 4 tasks of complete shards were kept" in page and "3 of 5" in page


def test_a_record_of_several_parts_counts_once_and_one_off_the_chain_not_at_all():
    """A file holds parts ``p`` to ``p + q - 1`` and has one line; the task is finished when a
    chain of lines from part 0 reaches the final part. A line from an attempt that cut the parts
    otherwise (parts 3-4 here) is off the chain and counts for nothing."""
    def part(first, count, final, rows):
        return PartRecord(first, final, TaskRecord("t", ((f"t.{first:05d}.parquet", rows, rows),), rows, rows, 0),
                          count)

    line = part(0, 3, False, 30).to_line()
    back = PartRecord.from_line(line, "a")
    assert '"q":3' in line and (back.part, back.parts, back.final, back.record.rows_out) == (0, 3, False, 30)
    assert finished_task({0: part(0, 3, False, 30)}) is None
    assert finished_task({0: part(0, 3, False, 30), 4: part(4, 2, True, 20)}) is None, "part 3 is missing"
    done = finished_task({0: part(0, 3, False, 30), 3: part(3, 3, True, 30), 4: part(4, 1, False, 99)})
    assert done is not None and done.rows_out == 60
    assert [name for name, _, _ in done.files] == ["t.00000.parquet", "t.00003.parquet"]

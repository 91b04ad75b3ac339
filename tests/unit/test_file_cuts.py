"""Cutting one large file into parts that several workers read: every record once, in order."""

import gzip
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_array.execution.cutting import FINER_AT_END, TASKS_PER_CPU, cut_tasks
from curator_array.formats import jsonl as jsonl_format
from curator_array.formats import parquet as parquet_format
from curator_array.formats.jsonl import JsonlReader
from curator_array.formats.parquet import ParquetReader
from curator_array.stages.filters import ExactDuplicateFilter
from curator_array.stages.io import MalformedRecordError
from curator_array.stages.tasks import (
    INPUT_BYTES,
    DocumentBatch,
    FailedTask,
    FileCut,
    FileGroupTask,
    WrittenFiles,
)

TEXTS = ["Grüße aus Köln", "日本語の文章です。", "короткий", "x" * 300, "مرحبا بالعالم", "", "a\nb"]


def records(count: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": f"doc-{i}", "text": rng.choice(TEXTS) * rng.randint(1, 4), "n": i} for i in range(count)]


def write_jsonl(path, rows, *, blank_every: int = 0, trailing_newline: bool = True) -> None:
    lines = []
    for index, row in enumerate(rows):
        lines.append(json.dumps(row, ensure_ascii=False))
        if blank_every and index % blank_every == 0:
            lines.append("")
    path.write_text("\n".join(lines) + ("\n" if trailing_newline else ""), encoding="utf-8")


def task_of(path, size=None) -> FileGroupTask:
    return FileGroupTask("fg-1", {INPUT_BYTES: size if size is not None else path.stat().st_size},
                         files=[str(path)], root=str(path.parent))


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("trailing_newline", [True, False])
def test_the_cuts_of_a_jsonl_file_read_each_line_once_in_order_wherever_they_fall(tmp_path, parts, trailing_newline):
    """Cut points fall inside lines and inside multi-byte characters; blank lines come between."""
    path = tmp_path / "big.jsonl"
    rows = records(500)
    write_jsonl(path, rows, blank_every=7, trailing_newline=trailing_newline)
    reader = JsonlReader()
    read = []
    for part in range(parts):
        read += reader.read_cut(str(path), FileCut(part, parts)).table.to_pylist()
    assert read == rows


def test_a_malformed_line_in_a_later_cut_is_named_by_its_line_in_the_file(tmp_path):
    path = tmp_path / "bad.jsonl"
    rows = records(300)
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    lines[250] = '{"id": "broken", "text": '
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    reader = JsonlReader()
    assert reader.read_cut(str(path), FileCut(0, 4)).table.num_rows > 0, "the cuts before it read"
    with pytest.raises(MalformedRecordError, match=r"bad\.jsonl: line 251: malformed JSON record"):
        reader.read_cut(str(path), FileCut(3, 4))
    skipping = JsonlReader(malformed="skip")
    read = [skipping.read_cut(str(path), FileCut(part, 4)) for part in range(4)]
    assert sum(contents.table.num_rows for contents in read) == 299
    assert sum(contents.skipped.get("malformed_lines", 0) for contents in read) == 1


def test_only_local_plain_jsonl_and_parquet_of_several_row_groups_can_be_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_format, "MIN_CUT_BYTES", 1000)
    monkeypatch.setattr(parquet_format, "MIN_CUT_BYTES", 1000)
    plain, packed = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    write_jsonl(plain, records(200))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    reader = JsonlReader()
    assert reader.most_cuts(task_of(plain)) == plain.stat().st_size // 1000 > 1
    assert reader.most_cuts(task_of(plain), finer=4) == plain.stat().st_size * 4 // 1000, "parts of 250 bytes"
    assert reader.most_cuts(task_of(packed)) == 1, "a gzip stream cannot be entered in the middle"
    two_files = FileGroupTask("fg-2", files=[str(plain), str(plain)])
    assert reader.most_cuts(two_files) == 1, "a task of several files is read whole"
    assert reader.most_cuts(FileGroupTask("fg-3", files=["s3://bucket/a.jsonl"])) == 1, "objects are fetched whole"
    assert reader.most_cuts(FileGroupTask("fg-4", files=[str(tmp_path / "gone.jsonl")])) == 1, "fails when read"
    table = pa.Table.from_pylist(records(2000))
    pq.write_table(table, tmp_path / "c.parquet", row_group_size=500)
    pq.write_table(table, tmp_path / "d.parquet")
    parquet = ParquetReader()
    assert parquet.most_cuts(task_of(tmp_path / "c.parquet")) == 4, "one part per row group at most"
    assert parquet.most_cuts(task_of(tmp_path / "c.parquet"), finer=4) == 4, "however fine the parts may be"
    assert parquet.most_cuts(task_of(tmp_path / "d.parquet")) == 1
    read = [parquet.read_cut(str(tmp_path / "c.parquet"), FileCut(part, 3)).table for part in range(3)]
    assert [t.num_rows for t in read] == [500, 500, 1000]
    assert pa.concat_tables(read).to_pylist() == table.to_pylist()
    empty = parquet.read_cut(str(tmp_path / "d.parquet"), FileCut(0, 2))
    assert empty.table.num_rows == 0 and empty.table.schema == table.schema, "a part of no row group"


def test_a_cut_task_is_read_as_a_numbered_part_that_counts_its_share_of_the_bytes(tmp_path):
    path = tmp_path / "big.jsonl"
    write_jsonl(path, records(400))
    reader = JsonlReader()
    size = path.stat().st_size
    cuts = reader.cut(task_of(path), 3)
    assert [(t.task_id, t.cut) for t in cuts] == [("fg-1", FileCut(0, 3, size)), ("fg-1", FileCut(1, 3, size)),
                                                  ("fg-1", FileCut(2, 3, size))]
    assert sum(t.metadata[INPUT_BYTES] for t in cuts) == path.stat().st_size
    batches = [reader.process(t) for t in cuts]
    assert all(isinstance(b, DocumentBatch) for b in batches)
    assert [(b.part, b.final) for b in batches] == [(0, False), (1, False), (2, True)]
    assert sum(b.counters.bytes_read for b in batches) == path.stat().st_size
    assert sum(b.counters.rows_read for b in batches) == 400
    assert batches[0].metadata["source_file"] == "big.jsonl"
    with path.open("a") as grown:
        grown.write(json.dumps({"id": "late", "text": "appended while the run read the file"}) + "\n")
    failed = reader.process(cuts[2])
    assert isinstance(failed, FailedTask) and f"big.jsonl: changed while its parts were read: listed at {size:,}" \
        in failed.reason, "no line read twice or missed across parts"
    path.unlink()
    failed = reader.process(cuts[1])
    assert isinstance(failed, FailedTask) and "big.jsonl" in failed.reason


def test_a_shard_of_few_large_files_is_cut_to_fill_every_cpu_and_one_of_many_files_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_format, "MIN_CUT_BYTES", 100)
    paths = []
    for index in range(8):
        paths.append(tmp_path / f"{index}.jsonl")
        write_jsonl(paths[-1], records(300 if index else 3, seed=index))
    reader = JsonlReader()
    tasks = [task_of(path) for path in paths]
    cut = cut_tasks([reader], tasks, cpus=2)
    wanted = -(-TASKS_PER_CPU * 2 // len(tasks))
    small = paths[0].stat().st_size // 100
    assert [sum(1 for t in cut if t.files == [str(p)]) for p in paths] == [
        small, *[wanted] * 5, *[wanted * FINER_AT_END] * 2], "the last task a CPU in finer parts"
    half = tasks[:4]
    assert [sum(1 for t in cut_tasks([reader], half, cpus=2) if t.files == [str(p)]) for p in paths[:4]] == [
        small, *[TASKS_PER_CPU * 2 // 4] * 3], "two files of four are too large a share to cut finer"
    assert cut_tasks([reader], tasks * TASKS_PER_CPU, cpus=1) == tasks * TASKS_PER_CPU, "enough tasks already"
    assert cut_tasks([reader, ExactDuplicateFilter()], tasks, cpus=2) == tasks, "dedup within a task sees it whole"


def test_a_file_too_small_to_be_cut_stays_whole_at_the_end_of_a_shard_too(tmp_path, monkeypatch):
    paths = [tmp_path / f"{index}.jsonl" for index in range(8)]
    for index, path in enumerate(paths):
        write_jsonl(path, records(3 if index == 7 else 300, seed=index))
    monkeypatch.setattr(jsonl_format, "MIN_CUT_BYTES", paths[-1].stat().st_size)  # finer, it could be cut in 4
    reader = JsonlReader()
    counts = [sum(1 for t in cut_tasks([reader], [task_of(p) for p in paths], cpus=2) if t.files == [str(p)])
              for p in paths]
    assert counts[-1] == 1, "the same file stays whole in any other shard"
    assert counts[-2] == -(-TASKS_PER_CPU * 2 // len(paths)) * FINER_AT_END


def test_a_cut_task_that_fails_in_two_parts_is_one_failed_task_and_its_other_parts_stay_on_record(tmp_path,
                                                                                                  monkeypatch):
    """The whole run in this process (stages applied in turn, no Ray): the driver's records."""
    from curator_array.core.layout import CheckpointLayout
    from curator_array.core.sharding import ShardConfig
    from curator_array.core.task_records import read_shard_records
    from curator_array.pipelines.options import PipelineOptions
    from curator_array.pipelines.pipeline import default_pipeline
    from curator_array.run.prepare import prepare_shard
    from curator_array.run.runner import run_prepared
    from curator_array.slurm.jobenv import JobEnvironment
    from curator_array.stages.apply import apply_chain

    monkeypatch.setattr(jsonl_format, "MIN_CUT_BYTES", 2000)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    lines = [json.dumps(row, ensure_ascii=False) for row in records(400)]
    lines[10] = lines[390] = "{broken"
    (inputs / "big.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def execute(stages, tasks):
        for task in cut_tasks(stages, tasks, cpus=2):
            yield from apply_chain(stages, [task])

    job = JobEnvironment.from_env({})
    prepared = prepare_shard(default_pipeline(PipelineOptions(str(inputs), str(out))), tmp_path / "ckpt", None)
    outcome = run_prepared(prepared, execute, job, job.attempt_id(), output_dir=out)
    assert outcome.status == "failed"
    assert [(f.task_id, f.stage) for f in outcome.failures] == [(prepared.tasks[0].task_id, "jsonl_reader")]
    assert "big.jsonl: line 11: malformed JSON record" in outcome.failures[0].reason
    parts = len([name for name in out.iterdir() if name.suffix == ".jsonl"])
    assert 1 < parts == (inputs / "big.jsonl").stat().st_size // 2000 - 2, "every part but the two that failed"
    records_now = read_shard_records(CheckpointLayout(tmp_path / "ckpt"), ShardConfig.single(), prepared.run.run_id)
    assert records_now.tasks == {} and len(records_now.unfinished_files[prepared.tasks[0].task_id]) == parts


def test_the_progress_line_counts_a_cut_task_done_only_once_every_part_is_written(tmp_path, monkeypatch):
    """The parts reach the driver last first: the task is done when the chain from part 0 to
    the final part is complete, as its record is (``TaskCompletion``), not at its final part."""
    from curator_array.pipelines.options import PipelineOptions
    from curator_array.pipelines.pipeline import default_pipeline
    from curator_array.run import runner
    from curator_array.run.prepare import prepare_shard
    from curator_array.slurm.jobenv import JobEnvironment
    from curator_array.stages.apply import apply_chain

    monkeypatch.setattr(jsonl_format, "MIN_CUT_BYTES", 2000)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    write_jsonl(inputs / "big.jsonl", records(300))
    reporters, seen = [], []

    class Reporter(runner.ProgressReporter):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            reporters.append(self)

    def execute(stages, tasks):
        results = [result for task in cut_tasks(stages, tasks, cpus=2) for result in apply_chain(stages, [task])]
        written = [result for result in results if isinstance(result, WrittenFiles)]
        assert len(written) > 2 and written[-1].final
        yield from (result for result in results if not isinstance(result, WrittenFiles))
        for result in reversed(written):
            yield result
            seen.append(reporters[0].line().split(",")[0])

    monkeypatch.setattr(runner, "ProgressReporter", Reporter)
    job = JobEnvironment.from_env({})
    prepared = prepare_shard(default_pipeline(PipelineOptions(str(inputs), str(out))), tmp_path / "ckpt", None)
    outcome = runner.run_prepared(prepared, execute, job, job.attempt_id(), output_dir=out, progress_interval_s=3600)
    assert outcome.status == "completed"
    assert seen == ["progress: 0/1 tasks"] * (len(seen) - 1) + ["progress: 1/1 tasks"]

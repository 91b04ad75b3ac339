"""The pipeline on a real Ray cluster: readers, filters, writers, sharding, failures."""

import gzip
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_array.core.errors import CheckpointMismatchError
from curator_array.core.layout import CheckpointLayout
from curator_array.core.sharding import ShardConfig, shard_of
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import Pipeline, default_pipeline
from curator_array.run.element import run_element_command
from curator_array.run.prepare import SourceFailedError, prepare_shard
from curator_array.run.request import RunRequest
from curator_array.run.shard import run_shard_here
from curator_array.slurm.job_context import JobContext
from curator_array.stages.base import SourceStage
from curator_array.stages.partition import group_task_id
from curator_array.stages.tasks import FailedTask, FileGroupTask
from tests.conftest import read_records, records_digest, visible_files
from tests.integration.helper_stages import (
    AutoscalingSetupCountingStage,
    FailSomeStage,
    ProcessProbeStage,
    SetupCountingStage,
)
from tests.support.in_process import AlreadyConnected

pytestmark = pytest.mark.ray
NODE_CPUS = 2  # the ray_cluster's: a pool of two actors, and no idle workers to start (see ray_cluster)


def input_records(directory: Path) -> dict[str, list[dict]]:
    """Records per input file, read with the standard library only (independent of the code)."""
    per_file = {}
    for path in sorted(directory.iterdir()):
        if path.name.endswith(".jsonl.gz"):
            text = gzip.open(path, "rt").read()
        elif path.suffix == ".jsonl":
            text = path.read_text()
        elif path.suffix == ".parquet":
            per_file[path.name] = pq.read_table(path).to_pylist()
            continue
        else:
            continue
        per_file[path.name] = [json.loads(line) for line in text.splitlines() if line.strip()]
    return per_file


def test_jsonl_to_parquet_copies_every_record(ray_cluster, sample_jsonl, tmp_path):
    out = tmp_path / "out"
    options = PipelineOptions(str(sample_jsonl), str(out), output_file_type="parquet")
    outcome = run_shard_here(default_pipeline(options), tmp_path / "ckpt", output_dir=out)
    expected = [r for records in input_records(sample_jsonl).values() for r in records]
    assert outcome.status == "completed"
    assert records_digest(read_records(out)) == records_digest(expected)
    assert outcome.work.rows_in == outcome.work.rows_out == len(expected)
    assert all(name.endswith(".parquet") for name in visible_files(out))


def test_a_large_file_is_cut_into_parts_that_workers_share_and_together_write_each_record_once(
        ray_cluster, tmp_path, monkeypatch):
    """The driver cuts the one large file of a shard of two; a rerun finds every part on record."""
    from curator_array.formats import jsonl as jsonl_format

    monkeypatch.setattr(jsonl_format, "MIN_CUT_BYTES", 8 << 10)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    texts = ["Grüße aus Köln, " * 9, "日本語の文章です。" * 7, "короткий текст " * 5]
    big = [{"id": f"big-{i}", "text": texts[i % 3] + str(i)} for i in range(1200)]
    (inputs / "big.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in big), "utf-8")
    (inputs / "small.jsonl").write_text("".join(json.dumps({"id": i, "text": "a b c"}) + "\n" for i in range(9)))
    options = PipelineOptions(str(inputs), str(out), output_file_type="parquet")
    outcome = run_shard_here(default_pipeline(options), tmp_path / "ckpt", output_dir=out)
    assert outcome.status == "completed"
    expected = [r for records in input_records(inputs).values() for r in records]
    assert records_digest(read_records(out)) == records_digest(expected)
    assert outcome.work.rows_in == outcome.work.rows_out == len(expected)
    assert outcome.work.bytes_in == sum(p.stat().st_size for p in inputs.iterdir())
    big_id, small_id = group_task_id(["big.jsonl"]), group_task_id(["small.jsonl"])
    parts = [name for name in visible_files(out) if name.startswith(big_id)]
    cuts = (inputs / "big.jsonl").stat().st_size // (8 << 10)
    assert parts == [f"{big_id}.{part:05d}.parquet" for part in range(cuts)], "one file per cut, each with rows"
    assert [name for name in visible_files(out) if not name.startswith(big_id)] == [f"{small_id}.parquet"]
    assert outcome.work.tasks_written == 2
    written = {name: (out / name).stat().st_mtime_ns for name in visible_files(out)}
    CheckpointLayout(tmp_path / "ckpt").manifest_path(0).unlink()  # as if the driver died after the last part
    again = run_shard_here(default_pipeline(options), tmp_path / "ckpt", output_dir=out)
    assert again.status == "completed" and again.work.rows_out == len(expected)
    assert {name: (out / name).stat().st_mtime_ns for name in visible_files(out)} == written, "nothing redone"


def test_parquet_to_jsonl_copies_every_record(ray_cluster, sample_parquet, tmp_path):
    out = tmp_path / "out"
    options = PipelineOptions(str(sample_parquet), str(out), input_file_type="parquet", output_file_type="jsonl")
    run_shard_here(default_pipeline(options), tmp_path / "ckpt", output_dir=out)
    expected = [r for records in input_records(sample_parquet).values() for r in records]
    assert records_digest(read_records(out)) == records_digest(expected)


def independent_filter(records, min_words, max_words):
    kept, seen = [], set()
    for record in records:
        text = record.get("text")
        if text is None or not text.strip():
            continue
        if not min_words <= len(text.split()) <= max_words:
            continue
        if text in seen:
            continue
        seen.add(text)
        kept.append(record)
    return kept


def test_filters_match_an_independent_computation(ray_cluster, sample_jsonl, tmp_path):
    out = tmp_path / "out"
    options = PipelineOptions.of(str(sample_jsonl), str(out), drop_empty=True, min_words=5, max_words=100, dedup_within_task=True)
    outcome = run_shard_here(default_pipeline(options), tmp_path / "ckpt", output_dir=out)
    expected = [r for records in input_records(sample_jsonl).values() for r in independent_filter(records, 5, 100)]
    got = read_records(out)
    assert len(got) < outcome.work.rows_in
    assert records_digest(got) == records_digest(expected)
    dropped = outcome.work.rows_dropped_by_stage
    assert set(dropped) == {"non_empty_text", "word_count", "exact_dedup"} and all(dropped.values())


def test_a_task_whose_documents_are_all_dropped_writes_no_file_and_its_manifest_says_so(ray_cluster, tmp_path):
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    (inputs / "empty.jsonl").write_text("".join(json.dumps({"id": i, "text": " "}) + "\n" for i in range(5)))
    (inputs / "words.jsonl").write_text("".join(json.dumps({"id": i, "text": "some words"}) + "\n" for i in range(5)))
    options = PipelineOptions.of(str(inputs), str(out), drop_empty=True, keep_removed=True)
    outcome = run_shard_here(default_pipeline(options).for_run(options), tmp_path / "ckpt", output_dir=out)
    assert outcome.status == "completed"
    assert outcome.work.tasks_written == 2 and outcome.work.tasks_without_output == 1
    assert [Path(name).name for name in outcome.work.output_files] == [f"{group_task_id(['words.jsonl'])}.jsonl"]
    assert visible_files(out) == [f"{group_task_id(['words.jsonl'])}.jsonl"], "no file without rows"
    kept_aside = read_records(out / ".removed" / "pipeline")
    assert [row["removed_by"] for row in kept_aside] == ["non_empty_text"] * 5, "the task's removed rows are kept"
    again = run_shard_here(default_pipeline(options).for_run(options), tmp_path / "ckpt", output_dir=out)
    assert again.status == "completed" and again.work.tasks_without_output == 1, "finished all the same"
    assert visible_files(out) == [f"{group_task_id(['words.jsonl'])}.jsonl"]


def test_four_shards_union_equals_unsharded_run_and_replay_is_identical(ray_cluster, sample_jsonl, tmp_path):
    kwargs = dict(output_file_type="parquet", drop_empty=True, min_words=3, dedup_within_task=True)
    whole = tmp_path / "whole"
    run_shard_here(default_pipeline(PipelineOptions.of(str(sample_jsonl), str(whole), **kwargs)), tmp_path / "c1", output_dir=whole)
    sharded = tmp_path / "sharded"
    pipeline = default_pipeline(PipelineOptions.of(str(sample_jsonl), str(sharded), **kwargs))
    owned = []
    for index in range(4):
        outcome = run_shard_here(pipeline, tmp_path / "c4", ShardConfig(index, 4), output_dir=sharded)
        assert outcome.status == "completed"
        owned += outcome.work.source_task_ids
    assert sorted(owned) == sorted(set(owned)) and len(owned) == 12
    union = read_records(sharded)
    assert records_digest(union) == records_digest(read_records(whole))
    assert len({r["id"] for r in union}) == len(union)
    before = {name: (sharded / name).read_bytes() for name in visible_files(sharded)}
    replay = run_shard_here(pipeline, tmp_path / "c4-replay", ShardConfig(2, 4), output_dir=sharded)
    assert replay.work.output_files
    assert {name: (sharded / name).read_bytes() for name in visible_files(sharded)} == before
    assert not [p for p in os.listdir(sharded) if ".tmp-" in p]


def test_failed_tasks_on_workers_block_the_manifest_and_are_recorded(ray_cluster, sample_jsonl, tmp_path):
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    options = PipelineOptions(str(sample_jsonl), str(out))
    pipeline = Pipeline(options.source(), [options.reader(), FailSomeStage("part-003.jsonl", "part-007.jsonl"), options.writer()])
    outcome = run_shard_here(pipeline, ckpt, output_dir=out)
    assert outcome.status == "failed" and outcome.exit_code == 3
    layout = CheckpointLayout(ckpt)
    assert not list(layout.completion_dir.glob("completed_slurm_array_*.json"))
    record = json.loads(outcome.failed_tasks_path.read_text())
    reasons = {f["reason"] for f in record["failed_tasks"]}
    assert reasons == {"refusing part-003.jsonl", "RuntimeError: exploded on part-007.jsonl"}
    assert {f["stage"] for f in record["failed_tasks"]} == {"fail_some"}
    assert len(visible_files(out)) == 10  # the other tasks were still written


def test_run_command_exit_code_3_for_failed_tasks(ray_cluster, sample_jsonl, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    failing = tmp_path / "failing_pipeline.py"
    failing.write_text(
        "from tests.integration.helper_stages import FailSomeStage\n"
        "def build(options):\n"
        "    return [options.reader(), FailSomeStage('part-001.jsonl'), options.writer()]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    request = RunRequest.from_flags(
        {"input_dir": str(sample_jsonl), "output_dir": str(tmp_path / "out"), "pipeline_ref": "failing_pipeline:build"}
    )
    assert run_element_command(request, JobContext.from_env({}), client_factory=AlreadyConnected) == 3
    request.pipeline_ref = None
    request.checkpoint_path = str(tmp_path / "other-run")  # another pipeline: another logical run
    assert run_element_command(request, JobContext.from_env({}), client_factory=AlreadyConnected) == 0


def test_actor_stage_runs_setup_once_per_actor(ray_cluster, sample_jsonl, tmp_path):
    out, probe = tmp_path / "out", tmp_path / "probe"
    options = PipelineOptions(str(sample_jsonl), str(out))
    pipeline = Pipeline(options.source(), [options.reader(), SetupCountingStage(str(probe)), options.writer()])
    assert run_shard_here(pipeline, tmp_path / "ckpt", output_dir=out).status == "completed"
    setups = {p.name.split("-", 1)[1]: p.read_text().splitlines() for p in probe.glob("setup-*")}
    processed = {p.name.split("-", 1)[1]: p.read_text().splitlines() for p in probe.glob("process-*")}
    assert len(setups) == 2, f"a pool of 2 actors, each in its own process: {setups}"
    assert all(calls == ["setup"] for calls in setups.values()), f"setup() ran more than once in an actor: {setups}"
    assert set(processed) <= set(setups), "every process that processed a task had run setup() first"
    assert sorted(t for tasks in processed.values() for t in tasks) == sorted(
        t.task_id for t in options.source().list_tasks())


def test_an_unsized_actor_pool_starts_one_actor_per_input_block_and_runs_the_plain_stages_around_it(
        ray_cluster, sample_jsonl, tmp_path):
    """The reader before it and the stages after it run in its actors: one pool takes every core."""
    from curator_array.execution.ray_data import RayDataExecutor, chain_stages

    out, probe = tmp_path / "out", tmp_path / "probe"
    options = PipelineOptions(str(sample_jsonl), str(out))
    stages = [options.reader(), AutoscalingSetupCountingStage(str(probe)), ProcessProbeStage(str(probe)),
              options.writer()]
    assert [[s.stage_name for s in seg] for seg in chain_stages(stages)] == [
        ["jsonl_reader", "autoscaling_setup_counter", "process_probe", "jsonl_writer"]]
    executor = RayDataExecutor(progress_bars=False)
    outcome = run_shard_here(Pipeline(options.source(), stages), tmp_path / "ckpt", output_dir=out, executor=executor)
    assert outcome.status == "completed"
    tasks = sorted(t.task_id for t in options.source().list_tasks())
    actors = {p.name.split("-", 1)[1] for p in probe.glob("setup-*")}
    probed = {p.name.split("-", 1)[1]: p.read_text().splitlines() for p in probe.glob("probe-*")}
    choice = executor.pool_choices["autoscaling_setup_counter"]
    assert choice.initial_size == min(len(tasks), NODE_CPUS), choice
    assert len(actors) >= 2, f"the pool never had a second actor: {actors}"
    assert set(probed) <= actors, "the plain stage after the actor ran inside the actors' processes"
    assert sorted(t for seen in probed.values() for t in seen) == tasks


def test_only_a_run_of_several_worker_pools_reserves_cluster_shares_and_holds_one_back_for_the_next(
        ray_cluster, sample_jsonl, tmp_path):
    import ray.data

    options = PipelineOptions(str(sample_jsonl), str(tmp_path / "one"))
    assert run_shard_here(default_pipeline(options), tmp_path / "one-ckpt", output_dir=tmp_path / "one").status == \
        "completed"
    context = ray.data.DataContext.get_current()
    assert context.op_resource_reservation_enabled is False
    assert context.downstream_capacity_backpressure_ratio is None
    options = PipelineOptions(str(sample_jsonl), str(tmp_path / "two"))
    stages = [options.reader(), SetupCountingStage(str(tmp_path / "probe")), options.writer()]
    assert run_shard_here(Pipeline(options.source(), stages), tmp_path / "two-ckpt",
                          output_dir=tmp_path / "two").status == "completed"
    context = ray.data.DataContext.get_current()
    assert context.op_resource_reservation_enabled is True
    default_ratio = ray.data.context.DEFAULT_DOWNSTREAM_CAPACITY_BACKPRESSURE_RATIO
    assert context.downstream_capacity_backpressure_ratio == default_ratio


def test_the_manifest_says_where_each_stages_time_went_and_profile_writes_each_workers_profile(
        ray_cluster, sample_jsonl, tmp_path):
    import pstats

    from curator_array.core.records.shard import CompletionManifest
    from curator_array.execution.ray_data import RayDataExecutor

    out, probe, profiles = tmp_path / "out", tmp_path / "probe", tmp_path / "profiles"
    options = PipelineOptions(str(sample_jsonl), str(out))
    reader, actor, writer = options.reader(), SetupCountingStage(str(probe)), options.writer()
    executor = RayDataExecutor(progress_bars=False, profile_dir=str(profiles))
    outcome = run_shard_here(Pipeline(options.source(), [reader, actor, writer]), tmp_path / "ckpt", output_dir=out,
                             executor=executor)
    manifest = CompletionManifest.read(outcome.manifest_path)
    per_stage = {t.stage: t for t in manifest.stages}
    assert list(per_stage) == [reader.stage_name, actor.stage_name, writer.stage_name, "record"]
    tasks = manifest.work.source_tasks
    assert all(t.outputs == tasks and t.wall_s > 0 and t.cpu_s >= 0 for t in manifest.stages)
    assert per_stage[reader.stage_name].rows == manifest.work.rows_in
    assert per_stage[writer.stage_name].rows == manifest.work.rows_out
    # the actor and the writer run in other Ray tasks than the stage before them: their tasks waited
    assert per_stage[actor.stage_name].queued_s > 0 and per_stage[writer.stage_name].queued_s > 0
    assert per_stage["record"].queued_s == 0  # chained with the writer, it never waits
    files = list(profiles.glob("*.prof"))
    assert len(files) >= 2  # the actors' processes and the plain tasks' workers
    functions = {(Path(name).name, function) for stats in files for name, _, function in pstats.Stats(str(stats)).stats}
    assert ("helper_stages.py", "process") in functions and ("io.py", "process") in functions


class FailingSource(SourceStage):
    def list_tasks(self):
        return [FileGroupTask("a1", files=["x"]), FailedTask("a2", reason="listing broke")]


def test_source_failed_task_is_an_error(tmp_path):
    pipeline = Pipeline(FailingSource(), default_pipeline(PipelineOptions(str(tmp_path), str(tmp_path))).stages)
    with pytest.raises(SourceFailedError, match="a source must raise instead"):
        prepare_shard(pipeline, tmp_path / "ckpt", None)


def test_changed_input_is_caught_by_its_shard_and_by_relist(sample_jsonl, tmp_path):
    options = PipelineOptions(str(sample_jsonl), str(tmp_path / "out"))
    prepare_shard(default_pipeline(options), tmp_path / "ckpt", ShardConfig(0, 4))
    owner = shard_of(group_task_id(["part-000.jsonl"]), 4)
    (sample_jsonl / "part-000.jsonl").unlink()
    (sample_jsonl / "new.jsonl").write_text('{"text": "x"}\n')
    others = [s for s in range(4) if s != owner]
    prepare_shard(default_pipeline(options), tmp_path / "ckpt", ShardConfig(others[0], 4))  # its files are intact
    with pytest.raises(CheckpointMismatchError, match=r"part-000.jsonl is gone"):
        prepare_shard(default_pipeline(options), tmp_path / "ckpt", ShardConfig(owner, 4))
    with pytest.raises(CheckpointMismatchError, match=r"1 added \(e.g. new.jsonl\), 1 removed \(e.g. part-000.jsonl\)"):
        prepare_shard(default_pipeline(options), tmp_path / "ckpt", ShardConfig(others[0], 4), relist=True)


def test_plain_stages_share_one_ray_task_and_sized_stages_do_not(tmp_path):
    from curator_array.execution.ray_data import chain_stages
    from tests.integration.helper_stages import SleepyStage

    options = PipelineOptions.of(str(tmp_path), str(tmp_path / "o"), drop_empty=True, min_words=2)
    reader, *filters, writer = default_pipeline(options).stages
    sized = SleepyStage(str(tmp_path), num_workers_per_node=2)
    segments = chain_stages([reader, *filters, sized, writer])
    assert [[s.stage_name for s in seg] for seg in segments] == [
        ["jsonl_reader", "non_empty_text", "word_count"], ["sleepy"], ["jsonl_writer"],
    ]


@pytest.mark.parametrize("name", ["commoncrawl", "fineweb"])
def test_the_web_pipelines_run_from_reading_to_parquet_in_one_ray_task(name, tmp_path):
    """No actor stage in them: an actor would start a process of its own beside the task
    workers Ray has already started, which would then idle."""
    pytest.importorskip("resiliparse")
    from curator_array.execution.ray_data import chain_stages
    from curator_array.pipelines import load_pipeline

    stages = load_pipeline(name, PipelineOptions(str(tmp_path), str(tmp_path / "o"), input_file_type="warc")).stages
    assert [[s.stage_name for s in seg] for seg in chain_stages(stages)] == [[s.stage_name for s in stages]]


def test_new_run_outside_an_array_archives_and_reruns_everything(ray_cluster, sample_jsonl, tmp_path, caplog):
    out = tmp_path / "out"
    flags = {"input_dir": str(sample_jsonl), "output_dir": str(out), "min_words": 5}
    context = JobContext.from_env({})
    assert run_element_command(RunRequest.from_flags(flags), context, client_factory=AlreadyConnected) == 0
    layout = CheckpointLayout(out)
    first = json.loads(layout.manifest_path(0).read_text())
    changed = {**flags, "min_words": 50}
    with pytest.raises(CheckpointMismatchError, match="min_words: 5 → 50"):
        run_element_command(RunRequest.from_flags(changed), context, client_factory=AlreadyConnected)
    assert run_element_command(RunRequest.from_flags({**changed, "new_run": True}), context,
                             client_factory=AlreadyConnected) == 0
    [archive] = layout.archive_root.iterdir()
    assert json.loads((archive / ".slurm_array_completion" / "completed_slurm_array_0.json").read_text()) == first
    second = json.loads(layout.manifest_path(0).read_text())
    assert second["run_id"] != first["run_id"] and second["rows_out"] < first["rows_out"]
    expected = [r for rs in input_records(sample_jsonl).values() for r in rs if len((r.get("text") or "").split()) >= 50]
    assert records_digest(read_records(out)) == records_digest(expected), "the output dir holds the new run only"
    old = [r for rs in input_records(sample_jsonl).values() for r in rs if len((r.get("text") or "").split()) >= 5]
    assert records_digest(read_records(archive / "outputs")) == records_digest(old), "the old run's outputs, archived"

"""The run contract: run.json pins the pipeline; a different one is refused, naming the change."""

from __future__ import annotations

import json

import pytest

from curator_array.cli import main
from curator_array.core.atomic import dump_json
from curator_array.core.errors import CheckpointMismatchError
from curator_array.core.fingerprint import PipelineFingerprint, describe_changes
from curator_array.core.layout import CheckpointLayout
from curator_array.core.run_contract import archive_run, read_run_config
from curator_array.core.sharding import ShardConfig
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import default_pipeline
from curator_array.run.phases import PHASES
from curator_array.run.prepare import prepare_shard
from tests.conftest import REPO


@pytest.fixture
def inputs(tmp_path):
    directory = tmp_path / "in"
    directory.mkdir()
    for index in range(6):
        (directory / f"part-{index}.jsonl").write_text(json.dumps({"text": f"doc {index}"}) + "\n")
    return directory


def pipeline(inputs, tmp_path, **options):
    values = {"input_dir": str(inputs), "output_dir": str(tmp_path / "out"), **options}
    chosen = PipelineOptions.from_values(values, PHASES.settings_from_options(values))
    return default_pipeline(chosen).for_run(chosen, PHASES.before_writer(chosen))


def test_run_json_pins_stages_parameters_formats_and_text_field(inputs, tmp_path):
    prepare_shard(pipeline(inputs, tmp_path, min_words=5, output_file_type="parquet"), tmp_path / "ckpt", ShardConfig(0, 3))
    pinned = read_run_config(CheckpointLayout(tmp_path / "ckpt")).pipeline
    assert (pinned["input"], pinned["output"], pinned["text_field"]) == ("jsonl", "parquet", "text")
    assert [s["name"] for s in pinned["stages"]] == ["jsonl_reader", "word_count", "parquet_writer"]
    word_count = pinned["stages"][1]
    assert word_count["params"] == {"max_words": None, "min_words": 5, "text_field": "text"}
    assert word_count["class"] == "curator_array.stages.filters.WordCountFilter"
    pinned = json.dumps(pinned.to_json())
    assert "input_dir" not in pinned and str(inputs) not in pinned, "paths are not the pipeline"


def test_same_pipeline_from_another_mount_point_is_accepted(inputs, tmp_path):
    prepare_shard(pipeline(inputs, tmp_path, min_words=5), tmp_path / "ckpt", ShardConfig(0, 3))
    moved = tmp_path / "mounted-elsewhere"
    inputs.rename(moved)
    prepare_shard(default_pipeline(PipelineOptions.of(str(moved), str(tmp_path / "o2"), min_words=5)), tmp_path / "ckpt",
                  ShardConfig(1, 3))


@pytest.mark.parametrize("first,second,expected", [
    ({"min_words": 5}, {"min_words": 3}, "min_words: 5 → 3 (stage word_count)"),
    ({}, {"output_file_type": "parquet"}, "output: jsonl → parquet"),
    ({"drop_empty": True}, {}, "stages: jsonl_reader, non_empty_text, jsonl_writer → jsonl_reader, jsonl_writer"),
    ({"malformed": "fail"}, {"malformed": "skip"}, "malformed: fail → skip (stage jsonl_reader)"),
    ({"dedup_within_task": True, "text_field": "text"}, {"dedup_within_task": True, "text_field": "body"},
     "text_field: text → body"),
    ({"dedup": "fuzzy"}, {"dedup": "fuzzy", "dedup_bands": 20}, "dedup.bands: 14 → 20 (dedup)"),
])
def test_a_different_pipeline_is_refused_naming_the_change(inputs, tmp_path, first, second, expected):
    prepare_shard(pipeline(inputs, tmp_path, **first), tmp_path / "ckpt", ShardConfig(0, 3))
    with pytest.raises(CheckpointMismatchError) as err:
        prepare_shard(pipeline(inputs, tmp_path, **second), tmp_path / "ckpt", ShardConfig(1, 3))
    assert expected in str(err.value) and "--new-run" in str(err.value)


def test_run_command_refuses_with_exit_2_before_starting_ray(inputs, tmp_path, capsys, monkeypatch):
    for name in ("SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"):
        monkeypatch.delenv(name, raising=False)
    prepare_shard(pipeline(inputs, tmp_path, min_words=5), tmp_path / "out", None)
    code = main(["run", "--input-dir", str(inputs), "--output-dir", str(tmp_path / "out"), "--min-words", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "min_words: 5 → 3 (stage word_count)" in err and err.count("\n") == 1


def test_run_json_from_before_fingerprints_is_accepted_then_pinned(inputs, tmp_path):
    layout = CheckpointLayout(tmp_path / "ckpt")
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 3}))
    prepare_shard(pipeline(inputs, tmp_path, min_words=5), layout.root, ShardConfig(0, 3))
    payload = json.loads(layout.run_file.read_text())
    assert payload["total_shards"] == 3 and payload["pipeline"]["stages"][1]["params"]["min_words"] == 5
    with pytest.raises(CheckpointMismatchError, match="min_words: 5 → 4"):
        prepare_shard(pipeline(inputs, tmp_path, min_words=4), layout.root, ShardConfig(1, 3))


def test_racing_pins_of_an_old_run_json_agree_on_one_fingerprint(inputs, tmp_path):
    """Two starts pin at once: the pin file decides, even before run.json is rewritten."""
    layout = CheckpointLayout(tmp_path / "ckpt")
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 3}))
    layout.pin_file("pipeline").write_text(json.dumps({"pipeline": pipeline(inputs, tmp_path, min_words=7).fingerprint().to_json()}))
    with pytest.raises(CheckpointMismatchError, match="min_words: 7 → 5"):
        prepare_shard(pipeline(inputs, tmp_path, min_words=5), layout.root, ShardConfig(0, 3))


def test_new_run_archives_the_old_records(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "3")
    out = tmp_path / "out"
    prepare_shard(pipeline(inputs, tmp_path, min_words=5), out, ShardConfig(0, 3))
    code = main(["run", "--input-dir", str(inputs), "--output-dir", str(out), "--min-words", "3", "--new-run"])
    assert code == 2 and "must happen once, not in every array element" in capsys.readouterr().err
    layout = CheckpointLayout(out)
    old_id = read_run_config(layout).run_id
    archive = archive_run(layout)
    assert archive.parent == layout.archive_root and archive.name.endswith(old_id)
    assert (archive / ".slurm_array_completion" / "run.json").is_file() and not layout.run_file.exists()
    prepare_shard(pipeline(inputs, tmp_path, min_words=3), out, ShardConfig(0, 3))
    assert read_run_config(layout).run_id != old_id


def test_new_run_moves_the_old_outputs_with_the_records_and_keeps_the_download_cache(inputs, tmp_path):
    """The output dir never mixes two runs: what the old run wrote, visible or staged, goes
    into its archive; the checkpoint's metadata and a download cache stay."""
    out = tmp_path / "out"
    prepare_shard(pipeline(inputs, tmp_path, min_words=5), out, ShardConfig(0, 3))
    for name in ("a.parquet", "b.parquet", ".curated/x.parquet", ".removed/word_count/y.parquet", ".downloads/w.gz"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(name)
    layout = CheckpointLayout(out)
    archive = archive_run(layout, out, kept=(".downloads",))
    assert sorted(p.name for p in out.iterdir()) == [".downloads", ".nemo_curator_metadata"]
    moved = sorted(str(p.relative_to(archive / "outputs")) for p in (archive / "outputs").rglob("*") if p.is_file())
    assert moved == [".curated/x.parquet", ".removed/word_count/y.parquet", "a.parquet", "b.parquet"]
    assert (out / ".downloads" / "w.gz").is_file()


def test_describe_changes_lists_nothing_for_equal_fingerprints(inputs, tmp_path):
    fingerprint = pipeline(inputs, tmp_path, dedup_within_task=True).fingerprint()
    assert describe_changes(fingerprint, json.loads(json.dumps(fingerprint.to_json()))) == []
    assert PipelineFingerprint.from_json(json.loads(json.dumps(fingerprint.to_json()))) == fingerprint


def test_an_option_added_or_dropped_is_named_with_its_value(inputs, tmp_path):
    """Adding --min-words brings a stage: the refusal names the option and value, not only the stages."""
    plain = pipeline(inputs, tmp_path).fingerprint()
    filtered = pipeline(inputs, tmp_path, min_words=5).fingerprint()
    added = describe_changes(plain, filtered)
    assert "min_words: unset → 5 (stage word_count, added)" in added and added[0].startswith("stages: ")
    assert "min_words: 5 → unset (stage word_count, removed)" in describe_changes(filtered, plain)


def test_manifest_of_an_archived_run_is_named_not_counted(inputs, tmp_path):
    from curator_array.core.errors import CorruptCheckpointError
    from curator_array.core.records.shard import CompletionManifest
    from curator_array.core.retry import plan_retry

    layout = CheckpointLayout(tmp_path / "ckpt")
    prepare_shard(pipeline(inputs, tmp_path), layout.root, ShardConfig(0, 3))
    CompletionManifest.of(ShardConfig(2, 3), run_id="an-old-run").write(layout)
    with pytest.raises(CorruptCheckpointError, match="completed_slurm_array_2.json: written for run an-old-run"):
        plan_retry(layout)


def test_submit_checks_the_contract_before_queueing_anything(inputs, tmp_path, capsys, monkeypatch):
    from tests.conftest import REPO

    out = tmp_path / "out"
    monkeypatch.setenv("INPUT_DIR", str(inputs))
    monkeypatch.setenv("OUTPUT_DIR", str(out))
    common = ["submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"), "--max-array-size", "none",
              "--dry-run"]
    assert main([*common, "--total-shards", "3", "--", "--min-words", "5"]) == 0
    assert not CheckpointLayout(out).run_file.exists(), "a dry run pins nothing"
    assert "--array=0-2" in capsys.readouterr().out
    prepare_shard(pipeline(inputs, tmp_path, min_words=5), out, ShardConfig(0, 3))
    assert main([*common, "--total-shards", "3", "--", "--min-words", "5"]) == 0
    capsys.readouterr()
    assert main([*common, "--total-shards", "3", "--", "--min-words", "3", "--output-file-type", "parquet"]) == 2
    err = capsys.readouterr().err
    assert "min_words: 5 → 3 (stage word_count)" in err and "output: jsonl → parquet" in err
    assert main([*common, "--total-shards", "4", "--", "--min-words", "5"]) == 2
    assert "total_shards=4 (the run has 3)" in capsys.readouterr().err


@pytest.mark.parametrize("fixture", ["checkpoint-all-phases", "checkpoint-0.1.0"])
def test_a_pinned_fingerprint_reads_back_to_the_same_json(fixture):
    """The typed fingerprint writes what every release wrote: a run it pinned stays the same run."""
    run_file = REPO / "tests" / "fixtures" / fixture / ".nemo_curator_metadata" / ".slurm_array_completion" / "run.json"
    pinned = json.loads(run_file.read_text())["pipeline"]
    if pinned is None:
        pytest.skip(f"{fixture} pins no pipeline in run.json")
    typed = PipelineFingerprint.from_json(pinned)
    assert dump_json(typed.to_json()) == dump_json(pinned)  # as run.json writes it, byte for byte
    assert typed.output == pinned["output"] and [s["name"] for s in typed.stages] == [s["name"] for s in pinned["stages"]]


def test_the_contract_carries_its_amendments_and_compares_a_start_with_them(inputs, tmp_path):
    """A repair's new malformed-record policy is part of the contract: a start with it is
    accepted, one with the policy pinned first is refused, naming it; the shard range too."""
    from curator_array.core.errors import CheckpointMismatchError as Mismatch
    from curator_array.core.run_contract import RunContract
    from curator_array.core.sharding import ShardRange

    checkpoint = tmp_path / "ckpt"
    strict, lenient = pipeline(inputs, tmp_path, malformed="fail"), pipeline(inputs, tmp_path, malformed="skip")
    prepare_shard(strict, checkpoint, ShardConfig(0, 3))
    before = RunContract.read(CheckpointLayout(checkpoint))
    assert before.amendments == () and before.pipeline.reader_policy == "fail"
    prepare_shard(lenient, checkpoint, ShardConfig(1, 3), repair=True)
    contract = RunContract.read(CheckpointLayout(checkpoint))
    assert [a.kind for a in contract.amendments] == ["malformed"] and contract.pipeline.reader_policy == "skip"
    assert contract.run.pipeline.reader_policy == "fail", "run.json keeps what the first start pinned"
    contract.check(ShardRange(3), pipeline=lenient.fingerprint())
    with pytest.raises(Mismatch, match="malformed: skip → fail"):
        contract.check(ShardRange(3), pipeline=strict.fingerprint())
    with pytest.raises(Mismatch, match="total_shards=4"):
        contract.check(ShardRange(4), pipeline=lenient.fingerprint())


def test_a_start_reads_the_contract_once_and_what_it_amends_joins_the_value_it_holds(inputs, tmp_path, monkeypatch):
    """A --repair start with a new policy and a mended input file writes two amendments and
    reads run.json's amendments once; a --relist start that adds a file reads them once too,
    and the next start finds all three."""
    import os

    from curator_array.core import run_contract
    from curator_array.core.run_contract import RunContract

    checkpoint = tmp_path / "ckpt"
    strict, lenient = pipeline(inputs, tmp_path, malformed="fail"), pipeline(inputs, tmp_path, malformed="skip")
    prepare_shard(strict, checkpoint, ShardConfig.single())
    mended = inputs / "part-2.jsonl"
    mended.write_text(json.dumps({"text": "doc 2, mended"}) + "\n")
    os.utime(mended, ns=(1, 1))
    reads = []
    real = run_contract.read_amendments
    monkeypatch.setattr(run_contract, "read_amendments", lambda layout: reads.append(1) or real(layout))

    prepare_shard(lenient, checkpoint, ShardConfig.single(), repair=True)
    assert len(reads) == 1
    (inputs / "part-9.jsonl").write_text(json.dumps({"text": "doc 9"}) + "\n")
    prepare_shard(lenient, checkpoint, ShardConfig.single(), relist=True, compare_tree=True)
    assert len(reads) == 2
    kinds = [a.kind for a in RunContract.read(CheckpointLayout(checkpoint)).amendments]
    assert sorted(kinds) == ["input", "malformed", "relist"]

import json

import pytest

from curator_array.core.errors import ConfigError, CorruptCheckpointError
from curator_array.core.layout import CheckpointLayout
from curator_array.core.records.shard import CompletionManifest
from curator_array.core.retry import format_retry, plan_retry
from curator_array.core.sharding import ShardConfig, ShardRange


def make_run(tmp_path, total, minimum=0, complete=()):
    layout = CheckpointLayout(tmp_path)
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": minimum, "total_shards": total}))
    for shard in complete:
        CompletionManifest.of(ShardConfig(shard, total, minimum)).write(layout)
    return layout


def retry_text(layout, fmt="array", max_size=None):
    return format_retry(plan_retry(layout), fmt, max_size)


def test_the_spec_example(tmp_path):
    incomplete = {1, 2, 5, 6, 7, 8, 9, 10, 99}
    layout = make_run(tmp_path, 100, complete=[s for s in range(100) if s not in incomplete])
    assert retry_text(layout, "fields") == "1-2,5-10,99 0 0 100\n"
    assert retry_text(layout, "array") == "1-2,5-10,99\n"


def test_windows_with_offsets(tmp_path):
    """As with 3,000 shards and a MaxArraySize of 1,000, at a hundredth of the scale."""
    incomplete = {3, 9, 10, 11, 25}
    layout = make_run(tmp_path, 30, complete=[s for s in range(30) if s not in incomplete])
    assert retry_text(layout, "fields", 10) == (
        "3,9 0 0 30\n"
        "0-1 10 0 30\n"
        "5 20 0 30\n"
    )


def test_windows_keep_physical_indices_below_the_limit(tmp_path):
    layout = make_run(tmp_path, 10, minimum=5, complete=[])
    lines = retry_text(layout, "fields", 4).splitlines()
    assert lines == ["1-3 4 5 10", "0-3 8 5 10", "0-2 12 5 10"]
    covered = []
    for line in lines:
        expr, offset, _, _ = line.split()
        low, high = map(int, expr.split("-"))
        assert high < 4
        covered += [i + int(offset) for i in range(low, high + 1)]
    assert covered == list(range(5, 15))


def test_minimum_index_not_zero(tmp_path):
    layout = make_run(tmp_path, 20, minimum=1, complete=range(1, 20))
    assert retry_text(layout, "fields") == "20 0 1 20\n"


def test_one_total_shard(tmp_path):
    assert retry_text(make_run(tmp_path, 1), "fields") == "0 0 0 1\n"


def test_all_complete_prints_nothing(tmp_path):
    layout = make_run(tmp_path, 5, complete=range(5))
    assert retry_text(layout, "fields") == "" and retry_text(layout, "fields", 2) == ""


def test_none_complete(tmp_path):
    assert retry_text(make_run(tmp_path, 8)) == "0-7\n"


def test_max_array_size_needs_fields(tmp_path):
    with pytest.raises(ConfigError, match="needs --format fields"):
        retry_text(make_run(tmp_path, 8), "array", 4)


def test_missing_run_json_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no run configuration"):
        plan_retry(CheckpointLayout(tmp_path))


def test_manifest_from_another_run_is_an_error(tmp_path):
    layout = make_run(tmp_path, 10, complete=[1])
    CompletionManifest.of(ShardConfig(2, 12)).write(layout)
    with pytest.raises(CorruptCheckpointError, match="completed_slurm_array_2.json: written for total_shards=12"):
        plan_retry(layout)


def test_corrupt_manifest_is_named(tmp_path):
    layout = make_run(tmp_path, 10, complete=[1])
    (layout.completion_dir / "completed_slurm_array_5.json").write_text('{"shard_index": 5, ')
    with pytest.raises(CorruptCheckpointError, match="completed_slurm_array_5.json: not valid JSON"):
        plan_retry(layout)


def test_manifest_with_wrong_status_is_an_error(tmp_path):
    layout = make_run(tmp_path, 10)
    (layout.completion_dir / "completed_slurm_array_x.json").write_text(
        json.dumps({"status": "running", "shard_index": 1, "total_shards": 10, "minimum_shard_index": 0})
    )
    with pytest.raises(CorruptCheckpointError, match="status is 'running'"):
        plan_retry(layout)


def test_reference_tool_manifest_names_are_read(tmp_path):
    layout = make_run(tmp_path, 3)
    (layout.completion_dir / "completed_slurm_array_3800bd4ecff9e7f6.json").write_text(
        json.dumps({"status": "completed", "shard_index": 1, "total_shards": 3, "minimum_shard_index": 0})
    )
    assert retry_text(layout) == "0,2\n"


def test_parallel_scan_gives_the_same_answer_and_names_a_bad_file(tmp_path, monkeypatch):
    from curator_array.core import checkpoint

    incomplete = {0, 17, 18, 19, 150, 299}
    layout = make_run(tmp_path, 300, complete=[s for s in range(300) if s not in incomplete])
    serial = retry_text(layout, "fields", 100)
    monkeypatch.setattr(checkpoint, "PARALLEL_READ_THRESHOLD", 10)
    assert retry_text(layout, "fields", 100) == serial == "0,17-19 0 0 300\n50 100 0 300\n99 200 0 300\n"
    (layout.completion_dir / "completed_slurm_array_x7.json").write_text("[1, 2")
    with pytest.raises(CorruptCheckpointError, match="completed_slurm_array_x7.json: not valid JSON"):
        plan_retry(layout)


def test_submission_windows_and_command_lines():
    from curator_array.slurm.submit import plan_submissions

    subs = plan_submissions([0, 1, 2, 3, 4, 5], ShardRange(6), "site_configs/local.sbatch", max_size=5, parallel=2,
                            script_args=["--checkpoint-path", "/a b", "--request", "r1"],
                            variables={"OUTPUT_DIR": "/a b"}, request="r1")
    assert [s.command_line() for s in subs] == [
        "OUTPUT_DIR='/a b' TOTAL_SHARDS=6 SHARD_INDEX_OFFSET=0 MINIMUM_SHARD_INDEX=0 sbatch --parsable --array=0-4%2 "
        "site_configs/local.sbatch --checkpoint-path '/a b' --request r1",
        "OUTPUT_DIR='/a b' TOTAL_SHARDS=6 SHARD_INDEX_OFFSET=5 MINIMUM_SHARD_INDEX=0 sbatch --parsable --array=0%2 "
        "site_configs/local.sbatch --checkpoint-path '/a b' --request r1",
    ]
    with pytest.raises(ConfigError, match="outside the run's range"):
        plan_submissions([7], ShardRange(6), "x.sbatch")


def test_max_array_size_values(monkeypatch):
    from curator_array.slurm import submit

    monkeypatch.setattr(submit, "max_array_size", lambda env: 4)
    assert submit.resolve_max_array_size(None, {}) is None
    assert submit.resolve_max_array_size(None, {}, default="auto") == 4
    assert submit.resolve_max_array_size("none", {}, default="auto") is None
    assert submit.resolve_max_array_size("10", {}, default="auto") == 10
    with pytest.raises(ConfigError, match="at least 1"):
        submit.resolve_max_array_size("0", {})

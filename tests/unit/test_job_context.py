"""The one resolver from an environment mapping to a job and a logical shard."""

import logging

import pytest

from curator_array.cli.entrypoint import explain
from curator_array.core.errors import ConfigError
from curator_array.core.sharding import ShardConfig
from curator_array.slurm.job_context import JobContext, resolve_shard


def shard(env):
    return resolve_shard(env)[0]


def test_no_variables_means_unsharded():
    assert shard({}) is None


def test_nemo_variables_win_over_slurm_fallbacks():
    env = {
        "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "5",
        "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "10",
        "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "2",
        "SLURM_ARRAY_TASK_ID": "1",
        "SLURM_ARRAY_TASK_COUNT": "3",
    }
    assert shard(env) == ShardConfig(5, 10, 2)


def test_plain_array_uses_the_slurm_variables():
    env = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "20", "SLURM_ARRAY_TASK_MIN": "0",
           "SLURM_ARRAY_TASK_MAX": "19"}
    config, reasons = resolve_shard(env)
    assert config == ShardConfig(3, 20, 0)
    assert reasons[1] == "total 20 from SLURM_ARRAY_TASK_COUNT (TOTAL_SHARDS unset)"


def test_window_with_offset_and_total():
    env = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "1000", "SHARD_INDEX_OFFSET": "1000",
           "TOTAL_SHARDS": "10000"}
    config, reasons = resolve_shard(env)
    assert config == ShardConfig(1007, 10000, 0)
    assert reasons[0] == "logical shard 1007 SLURM_ARRAY_TASK_ID 7 + SHARD_INDEX_OFFSET 1000"


def test_array_starting_at_one_with_minimum():
    env = {"SLURM_ARRAY_TASK_ID": "20", "SLURM_ARRAY_TASK_COUNT": "20", "SLURM_ARRAY_TASK_MIN": "1",
           "SLURM_ARRAY_TASK_MAX": "20", "MINIMUM_SHARD_INDEX": "1"}
    assert shard(env) == ShardConfig(20, 20, 1)


def test_submit_variables_that_agree_with_nemo_ones_are_fine():
    env = {"SLURM_ARRAY_TASK_ID": "1", "TOTAL_SHARDS": "4", "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "1",
           "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "4"}
    assert shard(env) == ShardConfig(1, 4)


@pytest.mark.parametrize(
    "env,message",
    [
        ({"SLURM_ARRAY_TASK_ID": "3"}, "no total is"),
        ({"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "3"}, "no total is"),
        ({"NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "4"}, "no shard index is"),
        ({"TOTAL_SHARDS": "8"}, "no shard index is"),
        ({"SLURM_ARRAY_TASK_ID": "0", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "0"}, "TOTAL_SHARDS=0 must be >= 1"),
        ({"SLURM_ARRAY_TASK_ID": "0", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "-2"}, "must be >= 1"),
        ({"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "-1", "SLURM_ARRAY_TASK_COUNT": "4"}, "SHARD_INDEX=-1 must be >= 0"),
        ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4", "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "-1"},
         "MINIMUM_SHARD_INDEX=-1 must be >= 0"),
        ({"SLURM_ARRAY_TASK_ID": "two", "SLURM_ARRAY_TASK_COUNT": "4"}, "SLURM_ARRAY_TASK_ID='two' is not an integer"),
        ({"NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "1e3", "SLURM_ARRAY_TASK_ID": "0"},
         "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS='1e3' is not an integer"),
        ({"NEMO_CURATOR_SLURM_ARRAY_ENABLED": "maybe"}, "is not a boolean"),
        ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4", "SHARD_INDEX_OFFSET": "4"}, "needs TOTAL_SHARDS"),
        ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
          "SLURM_ARRAY_TASK_MAX": "99"}, "the array has gaps"),
        ({"SLURM_ARRAY_TASK_ID": "1", "TOTAL_SHARDS": "0"}, "TOTAL_SHARDS=0 must be >= 1"),
        ({"SLURM_ARRAY_TASK_ID": "1", "TOTAL_SHARDS": "x"}, "TOTAL_SHARDS='x' is not an integer"),
        ({"SLURM_ARRAY_TASK_ID": "1", "TOTAL_SHARDS": "4", "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "2"},
         "SHARD_INDEX=2 conflicts with the submit variables, which give 1"),
        ({"SLURM_ARRAY_TASK_ID": "1", "TOTAL_SHARDS": "4", "MINIMUM_SHARD_INDEX": "1",
          "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "0"}, "MINIMUM_SHARD_INDEX=0 conflicts"),
    ],
)
def test_errors_name_the_variable(env, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        resolve_shard(env)


def test_disabled_skips_even_bad_values():
    assert shard({"NEMO_CURATOR_SLURM_ARRAY_ENABLED": "off", "SLURM_ARRAY_TASK_ID": "x"}) is None
    assert shard({"NEMO_CURATOR_SLURM_ARRAY_ENABLED": "0", "SLURM_ARRAY_TASK_ID": "3"}) is None


def test_minimum_alone_runs_unsharded_with_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert shard({"NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "1"}) is None
    assert "running unsharded" in caplog.text


def test_empty_values_count_as_unset():
    assert shard({"SLURM_ARRAY_TASK_ID": "", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": " "}) is None


def test_job_context_picks_the_client_and_explains():
    env = {"SLURM_JOB_ID": "9", "SLURM_ARRAY_JOB_ID": "8", "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4",
           "SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "1", "SLURMD_NODENAME": "n2"}
    context = JobContext.from_env(env, hostname="h")
    assert context.cluster == "slurm" and context.shard == ShardConfig(2, 4)
    lines = explain(context)
    assert lines[0] == "curator-array entrypoint: SLURM job 9 (array job 8, task 2, restart 0) on n2"
    assert "this is node 1 (worker)" in lines[1] and "logical shard 2" in lines[2]
    assert JobContext.from_env({}, hostname="h").cluster == "local"


def test_a_node_whose_runtime_hides_its_index_takes_one_in_the_rendezvous(tmp_path):
    """SLURM's --container passes the step's variables, not the task's: the nodes of one step
    number themselves by exclusive creates, so exactly one is node 0 (the driver)."""
    from curator_array.run.element import number_this_node
    from curator_array.run.request import RunRequest

    env = {"SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0", "SLURM_JOB_NUM_NODES": "2", "SLURM_ARRAY_TASK_ID": "1",
           "SLURM_ARRAY_TASK_COUNT": "2"}
    context = JobContext.from_env(env, hostname="h")
    assert context.cluster == "slurm" and not context.job.node_known and not context.job.is_driver
    assert "no SLURM_NODEID here" in explain(context)[1]
    request = RunRequest.from_flags({"output_dir": str(tmp_path / "out"), "input_dir": str(tmp_path)})
    numbered = [number_this_node(request, context).job for _ in range(2)]
    assert [job.node_id for job in numbered] == [0, 1] and numbered[0].is_driver
    claims = request.rendezvous_root / "slurm_job_9_step_0_restart_0" / "nodes"
    assert sorted(p.name for p in claims.iterdir()) == ["node_0", "node_1"]
    with pytest.raises(ConfigError, match=r"every node index of this step \(0-1\) is taken .* --ntasks-per-node=1"):
        number_this_node(request, context)
    known = JobContext.from_env({**env, "SLURM_NODEID": "1"}, hostname="h")
    assert number_this_node(request, known) is known, "a node that knows its index takes none"
    assert JobContext.from_env({"SLURM_JOB_ID": "9"}, hostname="h").job.node_id == 0, "one node is node 0"

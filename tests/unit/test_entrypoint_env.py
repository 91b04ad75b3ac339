import pytest

from curator_array.entrypoint import array_environment
from curator_array.errors import ConfigError


def exported(env):
    return array_environment(env)[0]


def test_plain_array():
    env = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "20", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "19"}
    assert exported(env) == {
        "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "3",
        "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "20",
        "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "0",
    }


def test_window_with_offset_and_total():
    env = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "1000", "SHARD_INDEX_OFFSET": "1000", "TOTAL_SHARDS": "10000"}
    out, reasons = array_environment(env)
    assert out["NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX"] == "1007"
    assert out["NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS"] == "10000"
    assert "SLURM_ARRAY_TASK_ID 7 + SHARD_INDEX_OFFSET 1000" in reasons[0]


def test_array_starting_at_one_with_minimum():
    env = {"SLURM_ARRAY_TASK_ID": "20", "SLURM_ARRAY_TASK_COUNT": "20", "SLURM_ARRAY_TASK_MIN": "1",
           "SLURM_ARRAY_TASK_MAX": "20", "MINIMUM_SHARD_INDEX": "1"}
    assert exported(env)["NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX"] == "1"


@pytest.mark.parametrize(
    "env,message",
    [
        ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4", "SHARD_INDEX_OFFSET": "4"}, "needs TOTAL_SHARDS"),
        ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
          "SLURM_ARRAY_TASK_MAX": "99"}, "the array has gaps"),
        ({"TOTAL_SHARDS": "8"}, "not a SLURM array task"),
        ({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "4"}, "SLURM_ARRAY_TASK_ID='x' is not an integer"),
        ({"SLURM_ARRAY_TASK_ID": "1", "TOTAL_SHARDS": "0"}, "TOTAL_SHARDS=0 must be >= 1"),
        ({"SLURM_ARRAY_TASK_ID": "1", "TOTAL_SHARDS": "4", "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "2"}, "conflicts"),
    ],
)
def test_errors(env, message):
    with pytest.raises(ConfigError, match=message):
        array_environment(env)


def test_not_an_array_and_disabled():
    assert exported({}) == {}
    assert exported({"NEMO_CURATOR_SLURM_ARRAY_ENABLED": "off", "SLURM_ARRAY_TASK_ID": "1"}) == {}

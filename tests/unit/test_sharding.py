import hashlib
import json
import logging
import random
import string
import subprocess
import sys

import pytest

from curator_array.errors import ConfigError
from curator_array.sharding import (
    ShardConfig,
    shard_config_from_env,
    shard_of,
    validate_source_ids,
)


def spec_formula(task_id: str, total: int, minimum: int) -> int:
    """The formula exactly as the spec writes it, kept independent of the implementation."""
    return int(hashlib.sha256(task_id.encode()).hexdigest()[:16], 16) % total + minimum


def random_ids(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "/._-é漢 "
    return ["t" + "".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(n)]


@pytest.mark.parametrize("total,minimum", [(1, 0), (7, 0), (100, 0), (20, 1), (10000, 500)])
def test_formula_matches_an_independent_computation(total, minimum):
    for task_id in random_ids(10_000):
        shard = shard_of(task_id, total, minimum)
        assert shard == spec_formula(task_id, total, minimum)
        assert minimum <= shard < minimum + total


def test_every_id_lands_in_exactly_one_shard():
    ids = random_ids(10_000, seed=3)
    total = 13
    owners = {tid: [s for s in range(total) if ShardConfig(s, total).owns(tid)] for tid in ids}
    assert all(len(shards) == 1 for shards in owners.values())
    union = [tid for s in range(total) for tid in ShardConfig(s, total).select(ids)]
    assert sorted(union) == sorted(ids)


def test_assignment_is_identical_in_separate_processes():
    ids = random_ids(2_000, seed=11)
    code = (
        "import json,sys; from curator_array.sharding import shard_of; "
        "ids=json.load(sys.stdin); print(json.dumps([shard_of(i, 37, 2) for i in ids]))"
    )
    results = []
    for seed in ("0", "12345"):  # different hash randomisation per process
        out = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(ids), capture_output=True, text=True,
            check=True, env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
        results.append(json.loads(out.stdout))
    assert results[0] == results[1] == [shard_of(i, 37, 2) for i in ids]


def test_no_variables_means_unsharded():
    assert shard_config_from_env({}) is None


def test_nemo_variables_win_over_slurm_fallbacks():
    env = {
        "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "5",
        "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "10",
        "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "2",
        "SLURM_ARRAY_TASK_ID": "1",
        "SLURM_ARRAY_TASK_COUNT": "3",
    }
    assert shard_config_from_env(env) == ShardConfig(5, 10, 2)


def test_slurm_fallbacks_are_used():
    env = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "20"}
    assert shard_config_from_env(env) == ShardConfig(3, 20, 0)


@pytest.mark.parametrize(
    "env,message",
    [
        ({"SLURM_ARRAY_TASK_ID": "3"}, "no total is"),
        ({"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "3"}, "no total is"),
        ({"NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "4"}, "no shard index is"),
        ({"SLURM_ARRAY_TASK_COUNT": "4"}, "no shard index is"),
        ({"SLURM_ARRAY_TASK_ID": "0", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "0"}, "must be > 0"),
        ({"SLURM_ARRAY_TASK_ID": "0", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "-2"}, "must be > 0"),
        ({"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "-1", "SLURM_ARRAY_TASK_COUNT": "4"}, "non-negative"),
        (
            {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4",
             "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "-1"},
            "minimum shard index must be non-negative",
        ),
        (
            {"SLURM_ARRAY_TASK_ID": "two", "SLURM_ARRAY_TASK_COUNT": "4"},
            "SLURM_ARRAY_TASK_ID='two' is not an integer",
        ),
        (
            {"NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "1e3", "SLURM_ARRAY_TASK_ID": "0"},
            "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS='1e3' is not an integer",
        ),
        ({"NEMO_CURATOR_SLURM_ARRAY_ENABLED": "maybe"}, "is not a boolean"),
    ],
)
def test_validation_rules(env, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        shard_config_from_env(env)


@pytest.mark.parametrize("word", ["0", "false", "FALSE", "no", "off", " Off "])
def test_enabled_false_words_disable_sharding(word):
    env = {"NEMO_CURATOR_SLURM_ARRAY_ENABLED": word, "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert shard_config_from_env(env) is None


def test_enabled_false_words_also_skip_validation_of_bad_values():
    env = {"NEMO_CURATOR_SLURM_ARRAY_ENABLED": "0", "SLURM_ARRAY_TASK_ID": "3"}
    assert shard_config_from_env(env) is None


def test_out_of_range_index_warns_and_selects_nothing(caplog):
    config = ShardConfig(shard_index=25, total_shards=20, minimum_shard_index=1)
    with caplog.at_level(logging.WARNING):
        assert config.select(random_ids(100)) == []
    assert "outside the assignable range 1..20" in caplog.text


def test_index_below_minimum_is_out_of_range():
    assert not ShardConfig(shard_index=0, total_shards=20, minimum_shard_index=1).in_range
    assert ShardConfig(shard_index=20, total_shards=20, minimum_shard_index=1).in_range


def test_minimum_alone_runs_unsharded_with_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert shard_config_from_env({"NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX": "1"}) is None
    assert "running unsharded" in caplog.text


def test_empty_values_count_as_unset():
    assert shard_config_from_env({"SLURM_ARRAY_TASK_ID": "", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": " "}) is None


def test_ids_starting_with_r_are_rejected():
    with pytest.raises(ConfigError, match="starts with 'r'"):
        validate_source_ids(["a", "r123"])


def test_duplicate_ids_are_rejected_and_named():
    with pytest.raises(ConfigError, match=r"1 source task id\(s\) appear more than once.*dup"):
        validate_source_ids(["a", "dup", "b", "dup"])


def test_empty_id_is_rejected():
    with pytest.raises(ConfigError, match="non-empty"):
        validate_source_ids(["a", ""])

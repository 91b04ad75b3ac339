import hashlib
import json
import logging
import random
import string
import subprocess
import sys

import pytest

from curator_array.core.errors import ConfigError
from curator_array.core.sharding import ShardConfig, ShardRange, shard_of, validate_source_ids


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
        "import json,sys; from curator_array.core.sharding import shard_of; "
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


def test_out_of_range_index_warns_and_selects_nothing(caplog):
    config = ShardConfig(shard_index=25, total_shards=20, minimum_shard_index=1)
    with caplog.at_level(logging.WARNING):
        assert config.select(random_ids(100)) == []
    assert "outside the assignable range 1..20" in caplog.text


def test_index_below_minimum_is_out_of_range():
    assert not ShardConfig(shard_index=0, total_shards=20, minimum_shard_index=1).in_range
    assert ShardConfig(shard_index=20, total_shards=20, minimum_shard_index=1).in_range


def test_ids_starting_with_r_are_rejected():
    with pytest.raises(ConfigError, match="starts with 'r'"):
        validate_source_ids(["a", "r123"])


def test_duplicate_ids_are_rejected_and_named():
    with pytest.raises(ConfigError, match=r"1 source task id\(s\) appear more than once.*dup"):
        validate_source_ids(["a", "dup", "b", "dup"])


def test_empty_id_is_rejected():
    with pytest.raises(ConfigError, match="non-empty"):
        validate_source_ids(["a", ""])


def test_shard_range_membership_indices_and_windows():
    shards = ShardRange(10, 5)
    assert (shards.last, len(shards), str(shards)) == (14, 10, "5..14")
    assert 5 in shards and 14 in shards and 4 not in shards and 15 not in shards and "5" not in shards
    assert list(shards) == list(range(5, 15))
    windows = shards.windows([14, 5, 6, 7, 8], max_array_size=4)
    assert [(w.array_expression, w.shard_index_offset) for w in windows] == [("1-3", 4), ("0", 8), ("2", 12)]
    assert [(w.array_expression, w.shard_index_offset) for w in shards.windows([5, 6, 9])] == [("5-6,9", 0)]
    with pytest.raises(ConfigError, match=r"shards \[15\] are outside the run's range 5..14"):
        shards.windows([15])


@pytest.mark.parametrize("total,minimum", [(0, 0), (-1, 0), (3, -1), (True, 0)])
def test_shard_range_refuses_nonsense(total, minimum):
    with pytest.raises(ConfigError):
        ShardRange(total, minimum)


def test_parallel_selection_equals_the_serial_one_in_input_order(monkeypatch):
    from curator_array.core import sharding

    ids = random_ids(5_000, seed=5)
    serial = [ShardConfig(s, 7).select(ids) for s in range(7)]
    monkeypatch.setattr(sharding, "PARALLEL_SELECT_THRESHOLD", 10)
    assert [ShardConfig(s, 7).select(ids) for s in range(7)] == serial
    assert all(part == [t for t in ids if t in set(part)] for part in serial), "input order is kept"
    assert sharding._FORKED_IDS == [], "the forked list is released"

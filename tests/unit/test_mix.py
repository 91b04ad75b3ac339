"""``--mix``: weights, budgets and epochs become each set's share of training and its epochs,
as docs/tokens.md says; what a mixture cannot give is refused in one line."""

from __future__ import annotations

import pytest

from curator_array.core.errors import ConfigError
from curator_array.tokens.mix import Mixture

HELD = {"bucket=19": 1_000, "bucket=10": 4_000, "bucket=0": 5_000}


def test_without_a_mixture_each_set_weighs_its_tokens():
    blend = Mixture({}).blend(HELD)
    assert {name: f["share"] for name, f in blend.items()} == {"bucket=0": 0.5, "bucket=10": 0.4, "bucket=19": 0.1}
    assert all(f["epochs"] == pytest.approx(1.0) for f in blend.values())


def test_epochs_and_budgets_become_shares_and_zero_drops_a_set():
    mixture = Mixture.of({"sets": {"bucket=19": {"epochs": 2.5}, "bucket=0": {"epochs": 0},
                                   "bucket=10": {"tokens": 1_500}}})
    blend = mixture.blend(HELD)
    drawn = {"bucket=19": 2_500, "bucket=10": 1_500, "bucket=0": 0}
    assert {name: f["share"] for name, f in blend.items()} == pytest.approx({k: v / 4_000 for k, v in drawn.items()})
    assert blend["bucket=19"]["epochs"] == pytest.approx(2.5) and blend["bucket=0"]["epochs"] == 0
    assert blend["bucket=10"]["epochs"] == pytest.approx(1_500 / 4_000)


def test_weights_share_what_the_total_leaves():
    mixture = Mixture.of({"total_tokens": 20_000, "sets": {"bucket=19": {"epochs": 4}, "bucket=10": {"weight": 3},
                                                           "bucket=0": {"weight": 1}}})
    blend = mixture.blend(HELD)
    assert blend["bucket=19"]["drawn"] == pytest.approx(4_000)
    assert blend["bucket=10"]["drawn"] == pytest.approx(12_000) and blend["bucket=0"]["drawn"] == pytest.approx(4_000)
    assert blend["bucket=10"]["epochs"] == pytest.approx(3.0)
    assert sum(f["share"] for f in blend.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(("payload", "held", "message"), [
    ({"sets": {"bucket=19": {"epochs": 5}}, "max_epochs": 4}, HELD,
     "set 'bucket=19' holds 1,000 tokens and would be drawn 5.00 epochs, more than max_epochs 4"),
    ({"sets": {"bucket=7": {"epochs": 2}}}, HELD, "--mix names the set 'bucket=7', which the run has not"),
    ({"sets": {"bucket=19": {"weight": 1}, "bucket=0": {"epochs": 1}}}, HELD, "weights beside budgets or epochs need"),
    ({"sets": {"bucket=19": {"weight": 1, "epochs": 1}}}, HELD, "takes one of weight, tokens or epochs"),
    ({"sets": {"bucket=19": {"epochs": -1}}}, HELD, "must be a number at least 0"),
    ({"total": 5}, HELD, "unknown key 'total'"),
    ({"total_tokens": 100, "sets": {"bucket=0": {"tokens": 500}, "bucket=10": {"weight": 1}}}, HELD,
     "more than total_tokens 100"),
])
def test_what_a_mixture_cannot_give_is_refused(payload, held, message):
    with pytest.raises(ConfigError) as refused:
        Mixture.of(payload).blend(held)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_file_that_is_not_toml_is_refused(tmp_path):
    (tmp_path / "mix.toml").write_text("sets = [\n")
    with pytest.raises(ConfigError, match="--mix .*mix.toml"):
        Mixture.read(tmp_path / "mix.toml")


def test_a_rehydration_table_reads_as_ranges_and_gives_copies():
    import numpy as np

    from curator_array.tokens.sets import copies_of, parse_rehydration, spread_keys

    ranges = parse_rehydration("1:1,2-4:2,5-100:3")
    assert ranges == ((1, 1, 1), (2, 4, 2), (5, 100, 3))
    assert copies_of(ranges, np.array([1, 2, 4, 5, 100, 101, 0])).tolist() == [1, 2, 2, 3, 3, 3, 1]
    for text in ("2:1", "1:1,3:2", "1-0:1", "1:x", "1:-1"):
        with pytest.raises(ValueError):
            parse_rehydration(text)
    rows, keys = spread_keys(np.array([5, 2**64 - 1], np.uint64), np.array([4, 1]))
    assert rows.tolist() == [0, 0, 0, 0, 1]
    assert keys.tolist() == [5, 5 + 2**62, 5 + 2**63, 5 + 3 * 2**62, 2**64 - 1], "evenly round the ring"

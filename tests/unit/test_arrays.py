import pytest

from curator_array.core.arrays import format_array_expression, parse_array_expression
from curator_array.core.errors import ConfigError


@pytest.mark.parametrize(
    "indices,expected",
    [
        ([1, 2, 5, 6, 7, 8, 9, 10, 99], "1-2,5-10,99"),
        ([], ""),
        ([0], "0"),
        ([3, 1, 2, 2], "1-3"),
        ([0, 2, 4], "0,2,4"),
    ],
)
def test_format(indices, expected):
    assert format_array_expression(indices) == expected


@pytest.mark.parametrize(
    "text,expected",
    [("1-2,5-10,99", [1, 2, 5, 6, 7, 8, 9, 10, 99]), ("0-9:3", [0, 3, 6, 9]), ("0-3%2", [0, 1, 2, 3]), ("7", [7])],
)
def test_parse(text, expected):
    assert parse_array_expression(text) == expected


@pytest.mark.parametrize("text", ["", "a", "3-1", "1-", "-1", "0-4:0"])
def test_parse_rejects_nonsense(text):
    with pytest.raises(ConfigError):
        parse_array_expression(text)


def test_round_trip():
    indices = [0, 1, 2, 10, 12, 13, 500]
    assert parse_array_expression(format_array_expression(indices)) == indices

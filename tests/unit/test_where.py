"""``--where``: a SQL expression over a batch's columns keeps the rows it holds true for, in their
order, as plain Python deciding the same would; NULL drops as SQL's WHERE drops; an expression
that is not one expression, or reaches for a file, is refused."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from curator_array.core.errors import ConfigError
from curator_array.stages.selection import WhereFilter, check_expression
from curator_array.stages.tasks import DocumentBatch

TEXTS = ["Grüße aus Köln, schöne Stadt", "東京の天気は晴れです", "", "Ça va très bien, merci", "Привет, мир"]


def batch(rows: int, seed: int = 5) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({
        "id": [f"d{n}" for n in range(rows)],
        "text": [rng.choice(TEXTS) for _ in range(rows)],
        "q": [None if n % 11 == 0 else rng.random() for n in range(rows)],
        "would_drop": [rng.choice([None, None, "word_count", "non_empty"]) for _ in range(rows)],
        "would_drop_all": [rng.choice([[], ["word_count"], ["word_count", "exact_dedup"]]) for _ in range(rows)],
    })


@pytest.mark.parametrize(("expression", "keeps"), [
    ("would_drop IS NULL AND q >= 0.5", lambda r: r["would_drop"] is None and r["q"] is not None and r["q"] >= 0.5),
    ("q < 0.25", lambda r: r["q"] is not None and r["q"] < 0.25),
    ("would_drop IS NULL OR would_drop_all = ['word_count']",
     lambda r: r["would_drop"] is None or r["would_drop_all"] == ["word_count"]),
    ("NOT list_contains(would_drop_all, 'exact_dedup') AND length(text) > 10",
     lambda r: "exact_dedup" not in r["would_drop_all"] and len(r["text"]) > 10),
])
def test_the_rows_an_expression_holds_true_for_are_kept_in_order(expression, keeps):
    table = batch(20_000)
    done = WhereFilter(expression).process(DocumentBatch("t", {}, table=table))
    expected = [row["id"] for row in table.to_pylist() if keeps(row)]
    assert done.table["id"].to_pylist() == expected and 0 < len(expected) < table.num_rows
    assert done.counters.dropped == {"where": table.num_rows - len(expected)}


@pytest.mark.parametrize(("expression", "message"), [
    ("q >", "syntax error"),
    ("q > 1; DROP TABLE t", "more than one statement"),
    ("   ", "the expression is empty"),
])
def test_what_is_not_one_expression_is_refused(expression, message):
    with pytest.raises(ConfigError, match=message):
        WhereFilter(expression)


def test_a_file_or_a_missing_column_is_refused_against_the_columns():
    schema = batch(1).schema
    with pytest.raises(ConfigError, match="file system operations are disabled"):
        check_expression("(SELECT count(*) FROM read_csv('/etc/passwd')) > 0", schema)
    with pytest.raises(ConfigError, match='column "score" not found'):
        check_expression("score > 0.5", schema)
    check_expression("q > 0.5 AND would_drop IS NULL", schema)

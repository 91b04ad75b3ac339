"""Tallies travel from a task's counters through its record line, a manifest and status as one
value: declared once in ``core.tallies``, each under its own name and record key."""

from __future__ import annotations

import json

import pytest

from curator_array.core.records.shard import ShardWork
from curator_array.core.tallies import TALLIES, Tallies
from curator_array.core.task_records import TaskRecord
from curator_array.stages.tasks import TaskCounters


def test_counts_add_by_tally_and_key_and_empty_ones_are_left_out():
    one = Tallies().plus("lines_removed", {"dclm.a": 2}).plus("would_drop_any", {"word_count": 1})
    two = Tallies().plus("lines_removed", {"dclm.a": 3, "dclm.b": 1})
    total = one + two
    assert total.of("lines_removed") == {"dclm.a": 5, "dclm.b": 1} and total.of("would_drop_any") == {"word_count": 1}
    assert Tallies().to_json() == {} and set(Tallies().to_json(every=True)) == set(TALLIES)
    assert not Tallies() and total
    with pytest.raises(ValueError, match="no tally is declared as 'lines'"):
        Tallies({"lines": {}})


def test_a_tally_survives_a_record_line_a_manifest_and_an_older_reader():
    counters = TaskCounters(rows_read=3).with_tally("would_drop_any", {"word_count": 2})
    counters = (counters + TaskCounters().with_tally("lines_removed", {"c4.x": 4}))
    record = TaskRecord("t", (), 3, 1, tallies=counters.tallies)
    line = json.loads(record.to_line())
    assert line["w"] == {"word_count": 2} and line["l"] == {"c4.x": 4}
    assert TaskRecord.from_line(record.to_line(), "a").tallies == counters.tallies
    work = ShardWork.of(tallies=counters.tallies).to_json()
    assert work["would_drop_any"] == {"word_count": 2} and work["lines_removed"] == {"c4.x": 4}
    assert ShardWork.from_json(work).tallies == counters.tallies
    assert "lines_removed" not in ShardWork().to_json(), "a run without a tally's counts writes no key for it"

"""A whole run of every phase kind, as a release wrote it, is read, retried and reported by
this one as it was then.

``tests/fixtures/checkpoint-all-phases`` was written by ``tests/support/build_phases_fixture.py``:
two curation shards, fuzzy dedup (signatures, buckets, clusters, removal), selection by a model
(scores, cut, selection) and token files (tokenize, tokens). Beside it, what ``status --json``
said of it then. What a later release says must hold every key and value said then (new keys
may be added, none dropped or changed): docs/development.md asks every later version to read it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import curator_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "checkpoint-all-phases"
PHASES = ("signatures", "buckets", "clusters", "removal", "quality_scores", "quality_cut", "quality_selection",
          "tokenize", "tokens")


@pytest.fixture
def run_copy(tmp_path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "out")
    return tmp_path / "out"


def holds(now, then, where: str = "status") -> None:
    """Every key and value of ``then`` is in ``now``, at every depth; lists element by element."""
    if isinstance(then, dict):
        assert isinstance(now, dict), where
        for key, value in then.items():
            assert key in now, f"{where}.{key} is gone"
            holds(now[key], value, f"{where}.{key}")
    elif isinstance(then, list):
        assert isinstance(now, list) and len(now) == len(then), f"{where}: {now!r} != {then!r}"
        for index, (item, earlier) in enumerate(zip(now, then)):
            holds(item, earlier, f"{where}[{index}]")
    else:
        assert now == then, f"{where}: {now!r}, was {then!r}"


def test_status_says_what_it_said_of_it(run_copy):
    then = json.loads((FIXTURES / "checkpoint-all-phases.expected-status.json").read_text())
    then["checkpoint_path"] = str(run_copy)
    now = json.loads(curator_cli("status", "--checkpoint-path", str(run_copy), "--json").stdout)
    holds(now, then)
    assert [phase["phase"] for phase in now["phases"]] == list(PHASES)
    assert [phase["phase"] for phase in now["run"]["phases"]] == ["curation", *PHASES], "every phase alike"
    first = now["run"]["phases"][0]
    assert first["missing"] == then["incomplete"] and first["complete"] == then["completed_count"]
    assert {key: first["counts"][key] for key in then["totals"]} == then["totals"]
    assert {step: n for step, n in first["counts"]["rows_dropped_by_stage"].items() if n} == {
        step: n for step, n in then["dropped"].items() if not step.endswith(".removed")}
    final, later = now["run"]["final"], {phase["phase"]: phase for phase in now["phases"]}
    assert final["rows"] == then["final_rows_out"] and final["complete"] and final["written_by"] in later
    assert final["tokens"] == later["tokenize"]["counts"]["tokens"], "the tokens of the documents the run kept"
    text = curator_cli("status", "--checkpoint-path", str(run_copy)).stdout
    assert "complete     2/2" in text and "unfinished   none" in text


def test_nothing_is_left_to_retry_in_any_phase(run_copy):
    assert curator_cli("retry", "--checkpoint-path", str(run_copy)).stdout == ""
    assert curator_cli("retry", "--checkpoint-path", str(run_copy), "--format", "fields").stdout == ""


def test_the_report_shows_every_phase(run_copy, tmp_path):
    pytest.importorskip("matplotlib")
    page = tmp_path / "report.html"
    curator_cli("report", "--checkpoint-path", str(run_copy), "-o", str(page))
    text = page.read_text()
    assert all(phase in text for phase in PHASES), [phase for phase in PHASES if phase not in text]

"""The first phase's figures are one declared ``Counts`` (``core.curation_counts``): read from
its manifests by the codec every phase's counts use, rendered by status, ``status --json``
and the report as every phase is, and the run's final figures named in one place."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from curator_array.core.curation_counts import CurationCounts
from curator_array.core.records.shard import ShardWork
from curator_array.core.tallies import Tallies
from tests.conftest import REPO

# Run against a copy of the package with one line added to CurationCounts, nothing else:
# a stage counts the toy tally on its task, the task's record line carries it, the shards'
# manifests hold it, and status, its JSON and the report show it.
TOY_RUN = textwrap.dedent("""
    import json, sys
    from pathlib import Path

    from curator_array.cli import main
    from curator_array.core.layout import CheckpointLayout
    from curator_array.core.records.shard import CompletionManifest, ShardWork
    from curator_array.core.sharding import ShardConfig
    from curator_array.core.task_records import TaskRecord
    from curator_array.stages.tasks import TaskCounters

    out = Path(sys.argv[1])
    layout = CheckpointLayout(out)
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 2}))
    for shard, found in enumerate((3, 4)):
        counters = TaskCounters(rows_read=10).with_tally("toys_found", {"toy_stage.red": found, "toy_stage.blue": 1})
        line = TaskRecord("task", (), 10, 9, 100, tallies=counters.tallies).to_line()
        record = TaskRecord.from_line(line, "1")
        work = ShardWork.of(source_tasks=1, rows_in=record.rows_in, rows_out=record.rows_out, tallies=record.tallies)
        CompletionManifest.of(ShardConfig(shard, 2), work=work).write(layout)
    for args in (["status", "--checkpoint-path", str(out)], ["status", "--checkpoint-path", str(out), "--json"],
                 ["report", "--checkpoint-path", str(out), "-o", str(out / "report.html")]):
        print("=====")
        sys.stdout.flush()
        main(args)
""")


def test_a_counter_added_to_the_first_phase_is_one_field(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO / "curator_array", source / "curator_array", ignore=shutil.ignore_patterns("__pycache__"))
    declared = source / "curator_array" / "core" / "curation_counts.py"
    anchor = "    lines_removed: dict = tally("
    assert anchor in declared.read_text()
    declared.write_text(declared.read_text().replace(
        anchor, '    toys_found: dict = tally("t", "Toys found, by stage and colour")\n' + anchor, 1))

    shown = subprocess.run([sys.executable, "-c", TOY_RUN, str(tmp_path / "out")], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(source)}, cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr[-3000:]
    _, text, as_json, _ = shown.stdout.split("=====\n")
    assert "    Toys found, by stage and colour: toy_stage.blue 2, toy_stage.red 7" in text, text
    status = json.loads(as_json)
    assert status["run"]["phases"][0]["counts"]["toys_found"] == {"toy_stage.blue": 2, "toy_stage.red": 7}
    assert status["toys_found"] == {"toy_stage.blue": 2, "toy_stage.red": 7}, "beside the other tallies"
    page = (tmp_path / "out" / "report.html").read_text()
    table = page.split("<h3>Toys found, by stage and colour</h3>", 1)[1].split("</table>")[0]
    assert "<tr><td>toy_stage.red</td><td>7</td></tr>" in table


def test_a_manifest_is_read_by_the_counts_codec_under_the_keys_it_writes():
    work = ShardWork.of(("a.jsonl", "b.jsonl"), source_tasks=2, rows_in=10, rows_out=7, bytes_in=99,
                                rows_dropped_by_stage={"word_count": 3}, records_skipped={"malformed_lines": 1},
                                tokens=40, tallies=Tallies({"lines_removed": {"c4.x": 5}}))
    written = work.to_json()
    counts = CurationCounts.from_json(written)
    assert counts == work.counts
    shown = counts.to_json()
    assert {key: shown[key] for key in written if key in shown} == {key: written[key] for key in written if key in shown}
    assert set(shown) - set(written) == {"would_drop_any", "tasks_without_output", "contamination"}, \
        "what a manifest leaves out when it is empty"
    assert (counts + counts).rows_dropped_by_stage == {"word_count": 6} and (counts + counts).lines_removed == {
        "c4.x": 10}
    assert CurationCounts.from_json({"rows_in": "many", "rows_out": 3}) == CurationCounts(rows_out=3), \
        "a figure of the wrong type is left at its default"


def test_the_final_figures_are_the_last_writers_once_it_is_complete(tmp_path):
    from curator_array.core.phase import PhaseState
    from curator_array.core.records.phase import PhaseManifest
    from curator_array.core.sharding import ShardRange
    from curator_array.core.status import RunStatus
    from curator_array.run.phases import PHASES

    shards = ShardRange(2)
    curated = CurationCounts(rows_in=100, rows_out=90, output_file_count=2, tokens=5000)
    root = PhaseState(PHASES.root, shards, (0, 1), {}, summed=(curated, 3.0))
    alone = RunStatus(tmp_path, shards, 2, [root])
    assert alone.final.to_json() == {"written_by": "curation", "complete": True, "rows": 90, "files": 2, "tokens": 5000}

    removal = PHASES.get("removal")
    counted = PhaseManifest(removal.name, 0, 2, counts=removal.counts(rows_in=50, rows_out=40, removed=10))
    halfway = RunStatus(tmp_path, shards, 2, [root, PhaseState(removal, shards, (0,), {}, {0: counted})])
    assert halfway.final.to_json() == {"written_by": "removal", "complete": False, "rows": None, "files": None,
                                       "tokens": None}, "nothing final while the last writer is missing an element"
    assert halfway.to_json()["final_rows_out"] is None and halfway.to_json()["totals"]["rows_out"] == 90


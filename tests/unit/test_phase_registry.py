"""Adding a phase is one file and one line: a toy phase, registered here, is part of every
run from then on. It shows in ``status``, ``retry``, ``submit --dry-run`` and the report,
and its elements run, check their inputs and record themselves like any other phase's."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass

import pytest

from curator_array.cli import main
from curator_array.core.counts import Counts
from curator_array.core.layout import CheckpointLayout
from curator_array.core.phase import SHARD, Phase, PhaseResult
from curator_array.core.records.shard import CompletionManifest, ShardWork
from curator_array.core.sharding import ShardConfig
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import default_pipeline
from curator_array.run.phases import PHASES
from curator_array.run.phases.layouts import curated_files
from curator_array.run.prepare import prepare_shard
from tests.conftest import REPO, SAMPLE


@dataclass(frozen=True)
class AuditCounts(Counts):
    files: int = 0


class Audit(Phase):
    """A toy phase: one element per curation shard, counting the files the shard wrote."""

    name = "audit"
    needs = ("curation",)
    noun = SHARD
    counts = AuditCounts
    matching_elements = True

    def elements(self, settings, shards):
        return shards

    def work(self, context, index):
        return PhaseResult(AuditCounts(len(curated_files(context.layout, index))))


@pytest.fixture
def audit():
    PHASES.register(Audit())
    yield
    PHASES.unregister("audit")


@pytest.fixture
def run(tmp_path):
    """A two-shard run of the sample data whose curation phase is complete for shard 0 only."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(SAMPLE / "jsonl", inputs)
    pipeline = default_pipeline(PipelineOptions(str(inputs), str(out)))
    prepared = [prepare_shard(pipeline, out, ShardConfig(shard, 2)) for shard in range(2)]
    return inputs, out, prepared


def complete(out, prepared, shard: int) -> None:
    """Shard ``shard``'s curation, done by hand: its inputs copied as its outputs, its manifest."""
    files = []
    for task in prepared[shard].tasks:
        for path in task.files:
            name = f"{task.task_id}.jsonl"
            shutil.copy(path, out / name)
            files.append(name)
    CompletionManifest.of(ShardConfig(shard, 2), work=ShardWork.with_files(tuple(files), source_tasks=1)).write(
        CheckpointLayout(out))


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_registered_phase_is_in_status_retry_submit_and_the_report(audit, run, capsys, tmp_path):
    inputs, out, prepared = run
    complete(out, prepared, 0)
    code, text, _ = cli(capsys, "status", "--checkpoint-path", str(out))
    assert code == 0 and "  audit      0/2; missing 0-1; blocked by curation (missing 1)" in text
    assert cli(capsys, "retry", "--checkpoint-path", str(out), "--format", "fields")[1] == "1 0 0 2\n"

    refused = cli(capsys, "run", "--input-dir", str(inputs), "--output-dir", str(out), "--phase", "audit")
    assert refused[0] == 2 and "audit element 1 cannot start: curation shard(s) 1" in refused[2]
    complete(out, prepared, 1)
    assert cli(capsys, "retry", "--checkpoint-path", str(out), "--format", "fields")[1] == "1 0 0 2 audit\n", \
        "element 0 completed at the refused run: its inputs were complete"

    code, text, _ = cli(capsys, "submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"),
                        "--total-shards", "2", "--max-array-size", "none", "--dry-run", "--",
                        "--input-dir", str(inputs), "--output-dir", str(out))
    lines = text.splitlines()
    assert code == 0 and len(lines) == 2, text
    assert "--phase" not in lines[0] and re.search(r"--dependency=afterany:'?<shard jobs>'?", lines[1])
    assert lines[1].endswith("--phase audit") and "TOTAL_SHARDS=2" in lines[1]

    assert cli(capsys, "run", "--input-dir", str(inputs), "--output-dir", str(out), "--phase", "audit")[0] == 0
    assert cli(capsys, "retry", "--checkpoint-path", str(out))[1] == ""
    status = json.loads(cli(capsys, "status", "--checkpoint-path", str(out), "--json")[1])
    assert status["phases"] == [{"phase": "audit", "elements": 2, "complete": 2, "missing": "", "queued": "",
                                 "failed": {}, "blocked_by": None,
                                 "counts": {"files": sum(len(p.tasks) for p in prepared)}}]

    page = tmp_path / "report.html"
    assert cli(capsys, "report", "--checkpoint-path", str(out), "-o", str(page))[0] == 0
    assert "<td>audit</td><td>2/2</td>" in page.read_text()


def test_without_it_the_run_has_its_first_phase_alone(run, capsys):
    _, out, prepared = run
    complete(out, prepared, 0)
    complete(out, prepared, 1)
    assert [state.name for state in PHASES.states(CheckpointLayout(out))] == [PHASES.root.name]
    assert "phases" not in cli(capsys, "status", "--checkpoint-path", str(out))[1].split("failed attempts")[0]

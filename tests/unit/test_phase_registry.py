"""Adding a phase is one file and one line: a toy phase, registered here, is part of every
run from then on. It shows in ``status``, ``retry``, ``submit --dry-run`` and the report,
and its elements run, check their inputs and record themselves like any other phase's."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from curator_array.cli import main
from curator_array.cli.run_command import parse_run_args
from curator_array.core.counts import Counts
from curator_array.core.layout import CheckpointLayout
from curator_array.core.options import RunOption
from curator_array.core.phase import OUTPUT, SHARD, Phase, PhaseResult
from curator_array.core.records.shard import CompletionManifest, ShardWork
from curator_array.core.run_contract import read_run_config
from curator_array.core.sharding import ShardConfig, ShardRange
from curator_array.pipelines.filters import FILTERS
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import default_pipeline
from curator_array.run.phases import PHASES
from curator_array.run.phases.layouts import curated_files
from curator_array.run.precedence import options_for_start, request_of
from curator_array.run.prepare import prepare_shard
from curator_array.run.submission import plan_submit
from curator_array.stages.filters import FilterStage
from curator_array.stages.tasks import DocumentBatch
from curator_array.storage.places import joined, put_bytes
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


def complete(out, prepared, shard: int, written: Path | None = None) -> None:
    """Shard ``shard``'s curation, done by hand: its inputs copied as its outputs (into
    ``written``, default the output dir), its manifest."""
    files = []
    (written or out).mkdir(parents=True, exist_ok=True)
    for task in prepared[shard].tasks:
        for path in task.files:
            name = f"{task.task_id}.jsonl"
            shutil.copy(path, (written or out) / name)
            files.append(name)
    CompletionManifest.of(ShardConfig(shard, 2), work=ShardWork.of(tuple(files), source_tasks=1)).write(
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
    text = cli(capsys, "status", "--checkpoint-path", str(out))[1]
    block = text.split("phases\n", 1)[1].splitlines()
    assert block[0].startswith("  curation   2/2 complete (source tasks 2, rows in 0, ") and block[1:] == [], text


# A phase that brings an option: ``--sample N`` adds it to a run; its settings are pinned
# with the pipeline, and its elements list the first N files each curation shard wrote.
@dataclass(frozen=True)
class SampleSettings:
    lines: int

    def to_json(self):
        return {"lines": self.lines}

    @classmethod
    def from_json(cls, payload):
        return cls(payload["lines"])

    @classmethod
    def field_defaults(cls):
        return {"lines": None}

    @classmethod
    def from_options(cls, given):
        return cls(given["lines"])


class Sample(Phase):
    name = "sample"
    needs = ("curation",)
    noun = SHARD
    counts = AuditCounts
    matching_elements = True
    settings_key = "sample"
    settings_type = SampleSettings
    options = (RunOption("sample", "Copy the first N documents of each curated file aside.", "int", "sample",
                         minimum=1, sets="lines"),)

    def work(self, context, index):
        chosen = curated_files(context.layout, index)[:context.settings_of(self).lines]
        listing = "".join(f"{name}\n" for name in chosen).encode()
        put_bytes(joined(context.output_dir, f"sample_{index}.txt"), listing)  # in a directory or under a prefix
        return PhaseResult(AuditCounts(len(chosen)))


@pytest.fixture
def sample():
    PHASES.register(Sample())
    yield
    PHASES.unregister("sample")


def test_a_phase_brings_its_own_option_to_help_run_json_status_and_submit(sample, capsys, tmp_path):
    inputs, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(SAMPLE / "jsonl", inputs)
    code, text, _ = cli(capsys, "run", "--help")
    assert code == 0 and "--sample INTEGER RANGE" in text and "(env: SAMPLE)" in " ".join(text.split())

    flags = parse_run_args(["--input-dir", str(inputs), "--output-dir", str(out), "--sample", "2"])
    layout, groups = plan_submit(flags, None, "site.sbatch", ShardRange(2), None, "none", None, {})
    pinned = read_run_config(layout)
    assert pinned.pipeline["sample"] == {"lines": 2}, "the phase's settings are pinned with the pipeline"
    assert [item.phase for group in groups for item in group] == [None, "sample"]
    request_id = groups[1][0].script_args[groups[1][0].script_args.index("--request") + 1]
    element = options_for_start({"checkpoint_path": str(out), "request": request_id, "phase": "sample"}, {})
    assert element["sample"].value == 2 and element["sample"].source == "flag", "submit forwards it to the elements"
    assert PHASES.plan_of(pinned)[-1].name == "sample"

    pipeline = request_of(options_for_start(flags, {})).build_pipeline(PHASES)
    prepared = [prepare_shard(pipeline, out, ShardConfig(shard, 2)) for shard in range(2)]
    for shard in range(2):
        complete(out, prepared, shard)
    assert cli(capsys, "run", "--checkpoint-path", str(out), "--request", request_id, "--phase", "sample")[0] == 0
    status = cli(capsys, "status", "--checkpoint-path", str(out))[1]
    assert "  sample=2 (flag)" in status and "  sample     2/2 complete (files " in status
    listed = [(out / f"sample_{shard}.txt").read_text().split() for shard in range(2)]
    assert all(0 < len(names) <= 2 for names in listed) and sum(map(len, listed)) <= 4


class DigitShareFilter(FilterStage):
    """A filter of the default pipeline with an option of its own: one class, one registry line."""

    name = "digit_share"
    pinned = ("max_share", "text_field")
    options = (RunOption("max_digit_share", "Drop documents whose characters are more than this share digits.",
                         "float", "filters", minimum=0, maximum=1),)

    def __init__(self, max_share: float, text_field: str = "text"):
        self.max_share = max_share
        super().__init__(text_field)

    @classmethod
    def from_options(cls, values, text_field):
        share = values.get("max_digit_share")
        return cls(share, text_field) if share is not None else None

    def keep(self, text):
        import pyarrow as pa

        return pa.array([sum(c.isdigit() for c in t) <= self.max_share * max(len(t), 1) for t in text.to_pylist()])


@pytest.fixture
def digit_filter():
    FILTERS.register(DigitShareFilter)
    yield
    FILTERS.unregister(DigitShareFilter)


def test_a_filter_brings_its_own_option_to_help_the_default_pipeline_and_the_contract(digit_filter, capsys, tmp_path):
    code, text, _ = cli(capsys, "run", "--help")
    assert code == 0 and "--max-digit-share FLOAT RANGE" in text and "(env: MAX_DIGIT_SHARE)" in " ".join(text.split())

    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text('{"text": "words and words"}\n{"text": "1234567 and 89"}\n')
    flags = parse_run_args(["--input-dir", str(inputs), "--output-dir", str(tmp_path / "out"),
                            "--max-digit-share", "0.3"])
    layout, _ = plan_submit(flags, None, "site.sbatch", ShardRange(1), None, "none", None, {})
    stages = read_run_config(layout).pipeline["stages"]
    assert [s["name"] for s in stages] == ["jsonl_reader", "digit_share", "jsonl_writer"]
    assert stages[1]["params"]["max_share"] == 0.3

    stage = default_pipeline(PipelineOptions.of(inputs, tmp_path / "o", max_digit_share=0.3)).stages[1]
    kept = stage.process(DocumentBatch("t", table=pa.table({"text": ["words and words", "1234567 and 89"]})))
    assert kept.table["text"].to_pylist() == ["words and words"]
    assert kept.counters.dropped == {"digit_share": 1}


@dataclass(frozen=True)
class ShoutCounts(Counts):
    rows_out: int = 0


class Shout(Phase):
    """A toy phase that rewrites the run's documents (their text in capitals): one class, and
    one line to register it before tokenize, which then reads what it wrote."""

    name = "shout"
    needs = (OUTPUT,)
    noun = SHARD
    counts = ShoutCounts
    matching_elements = True
    output_staged = True
    staging_dir = ".shouted"

    def elements(self, settings, shards):
        return shards

    def work(self, context, index):
        rows = 0
        for relative in context.input_files(self, index):
            source = Path(joined(context.input_dir(self), relative))
            documents = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
            put_bytes(joined(context.written_dir(self), relative),
                      "".join(json.dumps({**d, "text": d["text"].upper()}) + "\n" for d in documents).encode())
            rows += len(documents)
        return PhaseResult(ShoutCounts(rows))


@pytest.fixture
def shout():
    PHASES.register(Shout(), before="tokenize")
    yield
    PHASES.unregister("shout")


def test_a_phase_that_rewrites_the_output_is_read_by_tokenize_without_naming_it(shout, capsys, tmp_path):
    from tokenizers import Tokenizer

    from tests.support.tokenizer import train_tokenizer

    inputs, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(SAMPLE / "jsonl", inputs, ignore=shutil.ignore_patterns("*.gz"))
    texts = [json.loads(line)["text"] for p in sorted(inputs.iterdir()) for line in p.read_text().splitlines()]
    tokenizer = train_tokenizer([t.upper() for t in texts], tmp_path / "tokenizer.json", 500)
    flags = parse_run_args(["--input-dir", str(inputs), "--output-dir", str(out), "--tokenize", str(tokenizer)])
    layout, groups = plan_submit(flags, None, "site.sbatch", ShardRange(2), None, "none", None, {})
    assert [item.phase for group in groups for item in group] == [None, "shout", "tokenize", "tokens"]
    request_id = groups[1][0].script_args[groups[1][0].script_args.index("--request") + 1]
    pipeline = request_of(options_for_start(flags, {})).build_pipeline(PHASES)
    prepared = [prepare_shard(pipeline, out, ShardConfig(shard, 2)) for shard in range(2)]
    for shard in range(2):
        complete(out, prepared, shard, out / ".curated")  # the first phase writes to staging: a later one rewrites
    early = cli(capsys, "run", "--checkpoint-path", str(out), "--request", request_id, "--phase", "tokenize")
    assert early[0] == 2 and "tokenize element 0 cannot start: shout shard(s) 0" in early[2], early[2]
    for phase in ("shout", "tokenize", "tokens"):
        code, _, err = cli(capsys, "run", "--checkpoint-path", str(out), "--request", request_id, "--phase", phase)
        assert code == 0, err
    status = json.loads(cli(capsys, "status", "--checkpoint-path", str(out), "--json")[1])
    phases = {p["phase"]: p for p in status["phases"]}
    assert phases["shout"]["counts"]["rows_out"] == len(texts) == status["final_rows_out"]
    encoder = Tokenizer.from_file(str(tokenizer))
    expected = sum(len(encoder.encode(t.upper()).ids) + 1 for t in texts if t)
    assert phases["tokens"]["counts"]["tokens"] == expected, "tokenize read the shouted documents"
    assert all(json.loads(line)["text"].isupper() or not any(c.isalpha() for c in json.loads(line)["text"])
               for p in out.glob("*.jsonl") for line in p.read_text().splitlines()), "the output is shout's"

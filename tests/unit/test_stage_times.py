"""Where a shard's time goes: each stage's own wall and CPU time, carried on its outputs,
summed into the manifest, and shown by ``status`` and the report per stage and per node."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest

from curator_array.cli.status_view import format_status
from curator_array.core.records.shard import CompletionManifest, StageTime
from curator_array.core.sharding import ShardConfig
from curator_array.report.page import stage_rows
from curator_array.run.runner import stage_times
from curator_array.stages.apply import apply_chain, set_up
from curator_array.stages.base import ProcessingStage
from curator_array.stages.tasks import DocumentBatch, TaskCounters, WrittenFiles
from curator_array.stages.web.sandbox import ExtractionSandbox


def burn_cpu(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


class Sleeper(ProcessingStage):
    """Waits without using a CPU: all wall time, no CPU time."""
    name = "sleeper"

    def process(self, task):
        time.sleep(0.1)
        return task


class Burner(ProcessingStage):
    """Uses 0.05 s of CPU per task."""
    name = "burner"

    def process(self, task):
        burn_cpu(0.05)
        return task


class Splitter(ProcessingStage):
    """Streams each task as two parts, as a reader of a large file does; the first carries the counts."""
    name = "splitter"

    def process(self, task):
        yield DocumentBatch(task.task_id, counters=task.counters, table=task.table.slice(0, 1))
        yield DocumentBatch(task.task_id, table=task.table.slice(1))


class Outsourcer(ProcessingStage):
    """Has a child process do its work: the CPU it reports spending elsewhere counts as its own."""
    name = "outsourcer"
    spent = 0.0

    def process(self, task):
        time.sleep(0.02)
        Outsourcer.spent += 0.5
        return task

    def cpu_elsewhere_s(self) -> float:
        return Outsourcer.spent


def tasks(count: int) -> list[DocumentBatch]:
    return [DocumentBatch(f"t{i}", table=pa.table({"text": ["a", "b", "c"]})) for i in range(count)]


def summed(outputs) -> dict[str, StageTime]:
    counters = sum((o.counters for o in outputs), TaskCounters())
    return {t.stage: t for t in counters.times}


def test_each_stage_is_charged_its_own_time_not_the_time_of_the_stages_before_it():
    outputs = list(apply_chain([Sleeper(), Burner(), Splitter()], tasks(4), queued_s=2.5))
    times = summed(outputs)
    assert list(times) == ["sleeper", "burner", "splitter"]
    sleeper, burner, splitter = times["sleeper"], times["burner"], times["splitter"]
    assert sleeper.wall_s >= 0.4 and sleeper.cpu_s < 0.2
    assert burner.cpu_s >= 0.2 and burner.wall_s >= burner.cpu_s * 0.5
    # the splitter's calls run the two stages before it, yet they are not its time (a third
    # of theirs leaves room for a stall on a loaded host)
    upstream_wall_s, upstream_cpu_s = sleeper.wall_s + burner.wall_s, sleeper.cpu_s + burner.cpu_s
    assert splitter.wall_s < upstream_wall_s / 3 and splitter.cpu_s < upstream_cpu_s / 3
    assert (sleeper.outputs, burner.outputs, splitter.outputs) == (4, 4, 8)
    assert (sleeper.rows, splitter.rows) == (12, 12)
    # the wait before the process took the batch counts once, on the first stage
    assert sleeper.queued_s == 2.5 and burner.queued_s == splitter.queued_s == 0.0


class KeepFirst(ProcessingStage):
    """A filter: keeps the first row of each batch."""
    name = "keep_first"

    def process(self, task):
        return DocumentBatch(task.task_id, counters=task.counters, table=task.table.slice(0, 1))


def test_a_stage_counts_the_rows_it_received_not_those_it_kept():
    """A filter's rows (and rows/s) are over what it looked at; the stage after it gets what it kept."""
    times = summed(apply_chain([Sleeper(), KeepFirst(), Burner()], tasks(4)))
    assert (times["sleeper"].rows, times["keep_first"].rows, times["burner"].rows) == (12, 12, 4)


def test_cpu_a_stage_spends_in_child_processes_is_its_own():
    Outsourcer.spent = 0.0
    times = summed(apply_chain([Outsourcer(), Burner()], tasks(3)))
    assert times["outsourcer"].cpu_s >= 1.5 > times["burner"].cpu_s


class LoadsAModel(ProcessingStage):
    """Spends 0.3 s of CPU setting up (a model's load), then nearly nothing per task."""
    name = "loads_a_model"

    def setup(self):
        burn_cpu(0.3)

    def process(self, task):
        return task


def test_a_stages_set_up_counts_as_its_own_time_once_on_its_first_output():
    stages = [Sleeper(), LoadsAModel()]
    spent = set_up(stages)
    assert spent["loads_a_model"][1] >= 0.3 and spent["sleeper"][1] < 0.05
    outputs = list(apply_chain(stages, tasks(3), setup_s=spent))
    assert outputs[0].counters.times[1].cpu_s >= 0.3
    assert all(o.counters.times[1].cpu_s < 0.1 for o in outputs[1:])
    times = summed(outputs)
    assert 0.3 <= times["loads_a_model"].cpu_s < 0.45 and times["sleeper"].cpu_s < 0.2


def set_up_in_a_new_process(queue) -> None:
    """What a worker started for ``loads_a_model`` charges: it spent 0.3 CPU-s starting."""
    burn_cpu(0.3)
    first = set_up([Sleeper(), LoadsAModel()], started_for="loads_a_model")
    again = set_up([LoadsAModel()], started_for="loads_a_model")
    queue.put((first, again))


def test_a_worker_started_for_a_stage_charges_its_start_to_that_stages_set_up_once():
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    worker = context.Process(target=set_up_in_a_new_process, args=(queue,))
    worker.start()
    first, again = queue.get(timeout=60)
    worker.join(timeout=60)
    assert first["loads_a_model"][1] >= 0.6 and first["sleeper"][1] < 0.05  # its start, then its load
    assert 0.3 <= again["loads_a_model"][1] < 0.45  # the process's start counted once


def test_the_extraction_sandbox_reports_what_its_children_spent():
    sandbox = ExtractionSandbox("tests.unit.test_stage_times:busy_extract", timeout_s=30)
    try:
        sandbox.extract("<p>a</p>")
        first = sandbox.child_cpu_s
        sandbox.extract("<p>b</p>")
        assert sandbox.child_cpu_s - first >= 0.2
        sandbox.close()  # a child that ended keeps what it spent
        assert sandbox.child_cpu_s >= first + 0.2
        sandbox.extract("<p>c</p>")  # a new child adds its own
        assert sandbox.child_cpu_s >= first + 0.4
    finally:
        sandbox.close()


def busy_extract(html: str) -> str:
    burn_cpu(0.2)
    return html


def test_the_manifest_sums_outputs_per_stage_and_node_in_pipeline_order():
    stages = [Sleeper(), Burner()]
    written = [
        WrittenFiles("a", counters=TaskCounters(times=(StageTime("burner", "n2", 1, 5, 1.0, 1.0),
                                                       StageTime("sleeper", "n2", 1, 5, 2.0, 0.1, 3.0)))),
        WrittenFiles("b", counters=TaskCounters(times=(StageTime("sleeper", "n1", 1, 7, 1.0, 0.1),))),
        WrittenFiles("c", counters=TaskCounters(times=(StageTime("sleeper", "n2", 1, 3, 1.0, 0.2, 1.0),))),
    ]
    times = stage_times(written, stages)
    assert [(t.stage, t.node) for t in times] == [("sleeper", "n1"), ("sleeper", "n2"), ("burner", "n2")]
    assert times[1] == StageTime("sleeper", "n2", 2, 8, 3.0, pytest.approx(0.3), 4.0)
    manifest = CompletionManifest.of(ShardConfig(0, 1), stages=times)
    read_back = CompletionManifest.from_json(json.loads(json.dumps(manifest.to_json()))).stages
    assert read_back == tuple(StageTime(t.stage, t.node, t.outputs, t.rows, round(t.wall_s, 3), round(t.cpu_s, 3),
                                        round(t.queued_s, 3)) for t in times)


def test_status_and_report_show_stages_overall_and_per_node(tmp_path):
    from curator_array.core.phase import PhaseState
    from curator_array.core.sharding import ShardRange
    from curator_array.core.status import RunStatus
    from curator_array.run.phases import PHASES

    shards = ShardRange(2, 0)
    status = RunStatus(tmp_path, shards, 4, [PhaseState(PHASES.root, shards, (0, 1), {})], stage_times=[
        StageTime("reader", "n1", 2, 100, 1.0, 0.5), StageTime("filter", "n1", 2, 80, 4.0, 3.5, 2.0),
        StageTime("reader", "n2", 2, 100, 1.0, 0.5), StageTime("filter", "n2", 2, 60, 2.0, 1.5),
    ])
    payload = status.to_json()
    shown = [(s["stage"], s["cpu_s"], s["rows"]) for s in payload["stages"]]
    assert shown == [("reader", 1.0, 200), ("filter", 5.0, 140)]
    assert payload["stages"][1]["rows_per_s"] == 23.3 and payload["stages"][1]["queued_s"] == 2.0
    assert len(payload["stages_per_node"]) == 4
    text = format_status(status)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stage time"))
    assert lines[start + 2].split() == ["reader", "1.00", "17%", "2.00", "100", "0.00"]
    assert lines[start + 3].split() == ["filter", "5.00", "83%", "6.00", "23", "2.00"]
    assert "on n1:" in text and "on n2:" in text
    rows = stage_rows(status)
    assert [(r["node"], r["stage"]) for r in rows] == [("all nodes", "reader"), ("all nodes", "filter"),
                                                        ("n1", "reader"), ("n1", "filter"),
                                                        ("n2", "reader"), ("n2", "filter")]
    assert rows[3]["share"] == 3.5 / 4.0


def test_a_process_started_for_a_stage_charges_it_what_it_spent_outside_the_meters():
    """An actor's CPU around its meters (Ray handing it work, storing its outputs) goes to the
    stage it was started for, on the first output of its next call, once the outputs before
    have brought their meters' figures (a part's record may come before them, the set-up's
    charges with them); nothing is counted twice, nor the time a stage of another process
    left on a task."""
    from curator_array.stages.meter import UnmeteredCpu
    from curator_array.stages.tasks import FailedTask

    def output(**cpu):
        task = tasks(1)[0]
        for stage, seconds in cpu.items():
            task.counters = task.counters.with_time(StageTime(stage, "n", 1, 3, seconds, seconds, 0.0))
        return task

    # set up at 10.0 (1.5 of it the model's load), first call at 10.5, second at 14.7, third at 14.9
    clock = iter([10.0, 10.5, 14.7, 14.9])
    unmetered = UnmeteredCpu("model", ["reader", "model", "writer"], set_up_cpu=1.5, node="n",
                             cpu_clock=lambda: next(clock))
    failed = FailedTask("t9", reason="bad")
    first_call = list(unmetered.charge([failed, output(writer=0.1), output(reader=0.3, model=1.5 + 2.0, download=9.0)]))
    second_call = list(unmetered.charge([output(model=0.2)]))
    third_call = list(unmetered.charge([output(model=0.1)]))

    def cpu(task):
        return {t.stage: t.cpu_s for t in task.counters.times}

    assert first_call[0] is failed and not failed.counters.times
    assert cpu(first_call[1]) == pytest.approx({"writer": 0.1, "model": 0.5})  # from the set-up to the call
    assert cpu(first_call[2]) == pytest.approx({"reader": 0.3, "model": 3.5, "download": 9.0})
    assert cpu(second_call[0]) == pytest.approx({"model": 0.2 + 1.8})  # 14.7 - 10.5 - 2.4 metered since the set-up
    assert cpu(third_call[0]) == pytest.approx({"model": 0.1}), "nothing is due: 14.9 - 14.7 - 0.2"
    assert [t.outputs for t in first_call[1].counters.times if t.stage == "model"] == [0], "no output counted twice"

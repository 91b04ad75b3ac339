"""How long each stage takes, measured where it runs and carried on the tasks it emits.

Stages in one process run as a chain of lazy iterators: asking the last one for a task
runs the ones before it inside that call. So a meter times every call into its stage's
iterator and subtracts what the stage before it took meanwhile; what is left is the
stage's own wall and CPU time for that output. The figure travels on the output's
counters (``TaskCounters.times``), so the driver sums them like any other count and no
worker keeps state between tasks.

CPU time is the process's (``time.process_time``), so a library's own threads count,
plus what the chain's stages had child processes spend (``cpu_elsewhere_s``: the
extraction sandbox's). Work a stage does after its last output (rare: a flush with
nothing to emit) is not attributed. A process that exists for one stage (an actor)
also charges that stage what it spent outside the meters (:class:`UnmeteredCpu`).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator

from ..core.records.shard import StageTime
from .tasks import DocumentBatch, FailedTask, Task, WrittenFiles

NODE = socket.gethostname()


def rows_of(task: Task) -> int:
    if isinstance(task, DocumentBatch):
        return task.num_rows
    if isinstance(task, WrittenFiles):
        return task.rows_written
    return 0


class StageMeter:
    """Times one stage's iterator; ``upstream`` is the meter of the stage feeding it in this process.

    ``queued_s`` (time the input waited before this process picked it up) is added to the
    first output, so the wait of a Ray task counts once however many tasks it holds; so is
    ``setup_s`` (the stage's set-up, a model's load: wall and CPU seconds). Rows are
    the rows the stage received (what its upstream emitted meanwhile; a filter's rate is over
    what it looked at, not what it kept); the first stage of a process, a reader, counts
    what it emitted.
    """

    def __init__(self, stage: str, upstream: StageMeter | None = None, queued_s: float = 0.0, node: str = NODE,
                 cpu_clock: Callable[[], float] = time.process_time, setup_s: tuple[float, float] = (0.0, 0.0)):
        self.stage, self.upstream, self.node, self.cpu_clock = stage, upstream, node, cpu_clock
        self.queued_s = queued_s
        self.setup_s = setup_s  # wall and CPU seconds of the stage's set-up, added to its first output
        self.wall_s = self.cpu_s = 0.0  # inside calls to this iterator, the upstream's time included
        self.rows_out = 0  # rows this stage has emitted so far

    def measure(self, outputs: Iterable[Task]) -> Iterator[Task]:
        iterator = iter(outputs)
        while True:
            upstream_wall, upstream_cpu = (self.upstream.wall_s, self.upstream.cpu_s) if self.upstream else (0.0, 0.0)
            upstream_rows = self.upstream.rows_out if self.upstream else 0
            wall, cpu = time.perf_counter(), self.cpu_clock()
            try:
                task = next(iterator)
            except StopIteration:
                return
            finally:
                wall, cpu = time.perf_counter() - wall, self.cpu_clock() - cpu
                self.wall_s += wall
                self.cpu_s += cpu
            if isinstance(task, FailedTask):
                yield task
                continue
            if self.upstream is not None:
                wall -= self.upstream.wall_s - upstream_wall
                cpu -= self.upstream.cpu_s - upstream_cpu
            queued, self.queued_s = self.queued_s, 0.0
            (setup_wall, setup_cpu), self.setup_s = self.setup_s, (0.0, 0.0)
            wall, cpu = wall + setup_wall, cpu + setup_cpu
            emitted = rows_of(task)
            self.rows_out += emitted
            received = self.upstream.rows_out - upstream_rows if self.upstream is not None else emitted
            task.counters = task.counters.with_time(
                StageTime(self.stage, self.node, 1, received, max(wall, 0.0), max(cpu, 0.0), queued))
            yield task


class UnmeteredCpu:
    """What a process started for one stage spends outside its stages' meters, charged to that stage.

    An actor runs its chain only inside calls; around them its process still works for
    the chain: Ray hands it the next input, encodes and stores each output, and its own
    threads keep the worker alive (about 1 CPU-s of a 55-s element per actor). The bare
    loop a user compares with pays the same in its workers' time, and the actor exists
    for ``stage`` alone, so the stage's figures count it.

    Made right after :func:`~curator_array.stages.apply.set_up`, whose charges
    (``set_up_cpu``: the process's start, the model's load) the first outputs' meters
    carry. What is due is settled at the start of each call, on its first output: only
    then do the outputs before carry all their meters' figures (a part's record may leave
    before the output that carries the model's time). What the last call leaves is not counted.
    """

    def __init__(self, stage: str, stages: Iterable[str], set_up_cpu: float, node: str = NODE,
                 cpu_clock: Callable[[], float] = time.process_time):
        self.stage, self.stages, self.node, self.cpu_clock = stage, frozenset(stages), node, cpu_clock
        self.charged = cpu_clock()  # the process CPU on record, besides what the meters add from now on
        self.metered = -set_up_cpu  # what the outputs' meters carry for these stages, less the set-up already on record

    def charge(self, tasks: Iterable[Task]) -> Iterator[Task]:
        due = max(0.0, self.cpu_clock() - self.charged - max(self.metered, 0.0))
        self.charged += due
        for task in tasks:
            if not isinstance(task, FailedTask):
                self.metered += sum(t.cpu_s for t in task.counters.times if t.stage in self.stages)
                if due:
                    task.counters = task.counters.with_time(StageTime(self.stage, self.node, 0, 0, 0.0, due, 0.0))
                    due = 0.0
            yield task

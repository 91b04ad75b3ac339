"""Cutting a shard of few large files into parts, so that every worker has work to the end.

A worker takes a whole task at a time, so the run ends when the last task does: with 16
files of 77 MB on 2 CPUs (6 s each through a quality model), the worker that finished first
waited up to a whole file for the other, one core idle. Cut into parts that several workers
read at once (the first stage's ``cut``, a byte range of plain JSONL or row groups of
Parquet), the wait is at most a part. A shard of many files needs no cuts: the files
themselves are small against each worker's share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..stages.base import ProcessingStage
from ..stages.tasks import Task

TASKS_PER_CPU = 32  # what the wait at the end is a small share of: about 1/64 of the run, on average
FINER_AT_END = 4  # the last tasks, one a CPU, in parts this many times smaller: the wait is then a quarter part


def cut_tasks(stages: Sequence[ProcessingStage], tasks: Sequence[Task], cpus: float) -> list[Task]:
    """``tasks``, those the first stage can cut each in as many parts as bring the shard to
    ``TASKS_PER_CPU`` tasks a CPU (fewer when a file is too small for them). No task is cut
    when a stage compares a task's rows with each other (exact dedup within a task).

    Workers take tasks in order, so the last ones decide how long the others wait at the
    end: those, one a CPU, are cut ``FINER_AT_END`` times finer, below the usual smallest
    part (16 files of 77 MB through a model on 2 CPUs: parts of 4.6 MB instead of 18 at the
    end, bench_selection). Only where they are at most a ``FINER_AT_END``-th of the tasks,
    so that the shard has less than twice its parts (fewer files are cut evenly), and only
    files cut anyway: one too small to be cut stays whole, as in any other shard.
    """
    whole_cpus = max(1, math.ceil(cpus))
    wanted = TASKS_PER_CPU * whole_cpus
    if not tasks or len(tasks) >= wanted or any(stage.compares_rows for stage in stages):
        return list(tasks)
    first, parts = stages[0], math.ceil(wanted / len(tasks))
    finer_from = len(tasks) - whole_cpus if len(tasks) >= FINER_AT_END * whole_cpus else len(tasks)

    def parts_of(index: int, task: Task) -> int:
        usual = min(parts, first.most_cuts(task))
        if index < finer_from or usual == 1:
            return usual
        return min(parts * FINER_AT_END, first.most_cuts(task, finer=FINER_AT_END))

    return [cut for index, task in enumerate(tasks) for cut in first.cut(task, parts_of(index, task))]

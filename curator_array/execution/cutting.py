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


def cut_tasks(stages: Sequence[ProcessingStage], tasks: Sequence[Task], cpus: float) -> list[Task]:
    """``tasks``, those the first stage can cut each in as many parts as bring the shard to
    ``TASKS_PER_CPU`` tasks a CPU (fewer when a file is too small for them). No task is cut
    when a stage compares a task's rows with each other (exact dedup within a task)."""
    wanted = TASKS_PER_CPU * max(1, math.ceil(cpus))
    if not tasks or len(tasks) >= wanted or any(stage.compares_rows for stage in stages):
        return list(tasks)
    first, parts = stages[0], math.ceil(wanted / len(tasks))
    return [cut for task in tasks for cut in first.cut(task, min(parts, first.most_cuts(task)))]

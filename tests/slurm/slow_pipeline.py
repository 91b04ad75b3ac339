"""A copy pipeline with a deliberately slow stage, so tests can interrupt a shard mid-run."""

import os
import time

from curator_array.stages.base import ProcessingStage


class Slow(ProcessingStage):
    name = "slow"
    fingerprint_exclude = frozenset({"seconds"})  # how long it waits changes no output

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__()

    def process(self, task):
        time.sleep(self.seconds)
        return task


def build(options):
    """``SLOW_SECONDS`` per task; ``SLOW_SECONDS_ON_RESTART`` instead once SLURM has requeued the job;
    with ``SLOW_ONLY_ARRAY_TASK`` set, other array elements take 0.1 s per task."""
    seconds = os.environ.get("SLOW_SECONDS", "2")
    if int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
        seconds = os.environ.get("SLOW_SECONDS_ON_RESTART", seconds)
    only = os.environ.get("SLOW_ONLY_ARRAY_TASK")
    if only and os.environ.get("SLURM_ARRAY_TASK_ID") != only:
        seconds = "0.1"
    return [options.reader(), Slow(float(seconds)), options.writer()]

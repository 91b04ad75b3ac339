"""A copy pipeline with a deliberately slow stage, so tests can interrupt a shard mid-run."""

import os
import sys
import time

from curator_array.stages.base import ProcessingStage


class Slow(ProcessingStage):
    name = "slow"
    pinned = ()  # waiting changes no output

    def __init__(self, seconds: float, laggard: str = "", laggard_seconds: float = 0.0):
        self.seconds, self.laggard, self.laggard_seconds = seconds, laggard, laggard_seconds
        super().__init__()

    def process(self, task):
        files = " ".join(task.metadata.get("source_files", []))
        time.sleep(self.laggard_seconds if self.laggard and self.laggard in files else self.seconds)
        return task


def build(options):
    """``SLOW_SECONDS`` per task; ``SLOW_SECONDS_ON_RESTART`` instead once SLURM has requeued the job;
    with ``SLOW_ONLY_ARRAY_TASK`` set, other array elements take 0.1 s per task; the task of the
    file named by ``SLOW_LAGGARD`` takes ``SLOW_LAGGARD_SECONDS``; ``SLOW_BUILD_SECONDS`` delays the
    shard's preparation itself, after saying so on stderr."""
    if os.environ.get("SLOW_BUILD_SECONDS"):
        print("building the slow pipeline", file=sys.stderr, flush=True)
        time.sleep(float(os.environ["SLOW_BUILD_SECONDS"]))
    seconds = os.environ.get("SLOW_SECONDS", "2")
    if int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
        seconds = os.environ.get("SLOW_SECONDS_ON_RESTART", seconds)
    only = os.environ.get("SLOW_ONLY_ARRAY_TASK")
    if only and os.environ.get("SLURM_ARRAY_TASK_ID") != only:
        seconds = "0.1"
    laggard = os.environ.get("SLOW_LAGGARD", "")
    return [options.reader(), Slow(float(seconds), laggard, float(os.environ.get("SLOW_LAGGARD_SECONDS", seconds))),
            options.writer()]

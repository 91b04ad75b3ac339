"""A copy pipeline with a deliberately slow stage, so tests can interrupt a shard mid-run."""

import os
import time

from curator_array.stages.base import ProcessingStage


class Slow(ProcessingStage):
    name = "slow"

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__()

    def process(self, task):
        time.sleep(self.seconds)
        return task


def build(options):
    return [options.reader(), Slow(float(os.environ.get("SLOW_SECONDS", "2"))), options.writer()]

"""A copy pipeline whose first stage stamps the time it first ran (for bench_startup)."""

import os
import time

from curator_array.stages.base import ProcessingStage


class StampFirst(ProcessingStage):
    name = "stamp_first"

    def process(self, task):
        path = os.environ["BENCH_STAMP_FILE"]
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, repr(time.time()).encode())
            os.close(fd)
        except FileExistsError:
            pass
        return task


def build(options):
    return [options.reader(), StampFirst(), options.writer()]

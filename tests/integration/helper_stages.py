"""Stages used by the tests; imported by Ray workers too, so kept in a plain module."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

from curator_array.stages.base import ProcessingStage
from curator_array.stages.download import DownloadStage
from curator_array.stages.tasks import FailedTask


@contextmanager
def concurrency_probe(directory: str, tag: str = ""):
    """Count how many holders are inside at once, across processes and nodes of one host."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    lock = open(path / "lock", "a+")

    def update(delta: int) -> None:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = path / "state"
            current, peak = (map(int, state.read_text().split()) if state.exists() else (0, 0))
            current += delta
            peak = max(peak, current)
            state.write_text(f"{current} {peak}")
            if tag and delta > 0:
                with open(path / f"holders-{tag}", "a") as log:
                    log.write(f"{time.time()} +1\n")
            if tag and delta < 0:
                with open(path / f"holders-{tag}", "a") as log:
                    log.write(f"{time.time()} -1\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

    update(1)
    try:
        yield
    finally:
        update(-1)
        lock.close()


def peak_concurrency(directory: str) -> int:
    return int((Path(directory) / "state").read_text().split()[1])


class SleepyStage(ProcessingStage):
    name = "sleepy"
    resources = ProcessingStage.resources.__class__(cpus=0.25)

    def __init__(self, probe_dir: str, seconds: float = 0.4, **spec):
        self.probe_dir, self.seconds = probe_dir, seconds
        self.ray_stage_spec = spec
        super().__init__()

    def process(self, task):
        import ray

        node = ray.get_runtime_context().get_node_id()
        with concurrency_probe(self.probe_dir), concurrency_probe(os.path.join(self.probe_dir, node)):
            time.sleep(self.seconds)
        return task


class FailSomeStage(ProcessingStage):
    """Returns a FailedTask for one input file and raises for another."""

    name = "fail_some"

    def __init__(self, fail_file: str, raise_file: str | None = None):
        self.fail_file, self.raise_file = fail_file, raise_file
        super().__init__()

    def process(self, task):
        files = " ".join(task.metadata.get("source_files", []))
        if self.fail_file in files:
            return FailedTask(task.task_id, reason=f"refusing {self.fail_file}")
        if self.raise_file and self.raise_file in files:
            raise RuntimeError(f"exploded on {self.raise_file}")
        return task


class SetupCountingStage(ProcessingStage):
    """An actor stage that records every setup() call (one line per call, in a file per process)."""

    name = "setup_counter"
    ray_stage_spec = {"is_actor_stage": True, "num_workers": 2}

    def __init__(self, probe_dir: str):
        self.probe_dir = probe_dir
        super().__init__()

    def setup(self) -> None:
        Path(self.probe_dir).mkdir(parents=True, exist_ok=True)
        with open(Path(self.probe_dir) / f"setup-{os.getpid()}", "a") as log:
            log.write("setup\n")
        self.ready = True

    def process(self, task):
        assert self.ready
        with open(Path(self.probe_dir) / f"process-{os.getpid()}", "a") as log:
            log.write(task.task_id + "\n")
        return task


class AutoscalingSetupCountingStage(SetupCountingStage):
    """The same probe as an actor stage that declares no pool size (Ray Data autoscales it).

    Its tasks wait (until a minute after its set-up) for a second actor to set up, so that a
    pool that never starts a second actor shows as one, however fast the first one works.
    """

    name = "autoscaling_setup_counter"
    ray_stage_spec = {"is_actor_stage": True}

    def setup(self) -> None:
        super().setup()
        self.deadline = time.monotonic() + 60

    def process(self, task):
        while len(list(Path(self.probe_dir).glob("setup-*"))) < 2 and time.monotonic() < self.deadline:
            time.sleep(0.1)
        return super().process(task)


class ProcessProbeStage(ProcessingStage):
    """A plain stage that records which process ran each task."""

    name = "process_probe"

    def __init__(self, probe_dir: str):
        self.probe_dir = probe_dir
        super().__init__()

    def process(self, task):
        with open(Path(self.probe_dir) / f"probe-{os.getpid()}", "a") as log:
            log.write(task.task_id + "\n")
        return task


class ProbedDownloadStage(DownloadStage):
    """A DownloadStage that records how many downloads run at once, overall and per Ray node."""

    def __init__(self, download_dir: str, probe_dir: str, **kwargs):
        self.probe_dir = probe_dir
        super().__init__(download_dir, **kwargs)

    def fetch(self, url, expected):
        import ray

        node = ray.get_runtime_context().get_node_id()
        with concurrency_probe(self.probe_dir), concurrency_probe(os.path.join(self.probe_dir, node)):
            return super().fetch(url, expected)


class SlowConsumer(ProcessingStage):
    """An actor stage that reads each downloaded file slowly, then marks it consumed."""

    name = "slow_consumer"
    ray_stage_spec = {"is_actor_stage": True, "num_workers": 1}

    def process(self, task):
        for path in task.files:
            time.sleep(0.4)
            Path(path + ".consumed").write_text("1")
        return task

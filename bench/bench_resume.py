"""A shard that resumes where it stopped, on the 1 GB shard of bench_pipeline (200 source tasks).

1. Full run against a run killed (SIGKILL of the driver) once 80% of its tasks are recorded,
   then rerun: the rerun's wall time as a fraction of the full run's (goal <= 0.3). Both
   through `curator-array run`, Ray's start and stop included.
2. What recording finished tasks costs: the same pipeline with and without task records,
   in pairs (the order alternating) in one Ray cluster; the pipeline's own time (the
   manifest's duration) of each pair side by side, the median of their ratios (goal: under
   2% more), and the driver's own time spent following finished tasks (the workers checksum
   and record them), which machine noise does not blur.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pipeline import SIZES, make_input  # noqa: E402
from support import CACHE, REPO, timed  # noqa: E402

sys.path.insert(0, str(REPO))
_, FILES, BYTES = SIZES[-1]  # the 1 GiB shard


def shard_input() -> Path:
    return make_input(FILES, BYTES)[0]


FILTERS = ["--output-file-type", "parquet", "--drop-empty", "--min-words", "5", "--max-words", "1000", "--no-progress"]


def command(out: Path) -> list[str]:
    return [sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(shard_input()),
            "--output-dir", str(out), *FILTERS]


def recorded(out: Path) -> int:
    from curator_array.core.layout import CheckpointLayout
    from curator_array.core.task_records import count_done

    return count_done(CheckpointLayout(out), 0)[0]


def stop_and_rerun(runs: Path) -> tuple[float, float, int]:
    full = timed(command(runs / "full"))
    out = runs / "resumed"
    driver = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    while recorded(out) < 160 and driver.poll() is None:
        time.sleep(0.05)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    kept = recorded(out)
    in_place = sum(1 for p in out.glob("*.parquet"))
    time.sleep(2)  # the killed element's Ray processes leave with it
    rerun = timed(command(out))
    resumed = json.loads((out / ".nemo_curator_metadata" / ".slurm_array_completion"
                          / "completed_slurm_array_0.json").read_text())["resumed_tasks"]
    print(f"at the kill: {in_place} outputs in place, {kept} tasks recorded; the rerun kept {resumed} "
          f"and redid {200 - resumed} (of which {in_place - resumed} had an output in place)")
    return full, rerun, kept


def timeline(out: Path) -> tuple[float, float]:
    """(seconds from process start to the first result, seconds from the first to the last result)."""
    manifest = json.loads((out / ".nemo_curator_metadata" / ".slurm_array_completion"
                           / "completed_slurm_array_0.json").read_text())
    marks = manifest["timeline_s"]
    return marks["first_result"], marks["last_result"] - marks["first_result"]


def recording_cost(runs: Path, pairs: int = 5) -> tuple[list[float], list[float], list[float]]:
    from curator_array.execution.clients import RayClient
    from curator_array.execution.ray_cluster import NodeOptions
    from curator_array.pipelines.options import PipelineOptions
    from curator_array.pipelines.pipeline import default_pipeline
    from curator_array.run.shard import run_shard_here

    durations: dict[bool, list[float]] = {True: [], False: []}
    recording = []
    with RayClient(node_options=NodeOptions(object_store_memory=300 * 2**20)):
        for repetition in range(pairs):
            for record in (True, False) if repetition % 2 == 0 else (False, True):
                out = runs / f"cost-{record}-{repetition}"
                options = PipelineOptions.of(str(shard_input()), str(out), output_file_type="parquet", drop_empty=True,
                                          min_words=5, max_words=1000)
                outcome = run_shard_here(default_pipeline(options), out, output_dir=out, record_tasks=record)
                manifest = json.loads(outcome.manifest_path.read_text())
                durations[record].append(manifest["duration_s"])
                if record:
                    recording.append(outcome.recording_s / manifest["duration_s"])
                shutil.rmtree(out)
    return durations[True], durations[False], recording


def main() -> None:
    shard_input()
    runs = CACHE / "resume-runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    full, rerun, kept = stop_and_rerun(runs)
    size = sum(p.stat().st_size for p in (runs / "resumed" / ".nemo_curator_metadata" / ".task_records").rglob("*"))
    print(f"full run: {full:.1f}s; killed at {kept}/200 tasks recorded, rerun {rerun:.1f}s "
          f"= {rerun / full:.2f} of a full run (goal <= 0.3); task records {size / 1024:.0f} KiB for {kept} tasks")
    work = {name: timeline(runs / name) for name in ("full", "resumed")}
    print(f"  of which tasks (first to last result): full {work['full'][1]:.1f}s, rerun {work['resumed'][1]:.1f}s "
          f"= {work['resumed'][1] / work['full'][1]:.2f}; start-up to the first result: full {work['full'][0]:.1f}s, "
          f"rerun {work['resumed'][0]:.1f}s")
    with_records, without, recording = recording_cost(runs)
    ratios = [a / b for a, b in zip(with_records, without)]
    print(f"pipeline alone, {len(ratios)} pairs: with task records {[round(d, 2) for d in with_records]} s, "
          f"without {[round(d, 2) for d in without]} s; median ratio {statistics.median(ratios) - 1:+.1%} "
          f"(goal < 2%); the driver spent {statistics.median(recording):.2%} of the run following tasks")


if __name__ == "__main__":
    main()

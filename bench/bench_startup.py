"""Per array task: where the time goes from process start to the first task, and from the
last task to exit (the element's manifest records its phases, `timeline_s`); 1 node and 2 nodes.

The two nodes run as two entrypoint processes with the variables srun gives each node
(SLURM_NODEID 0 and 1), on this host. Beside it, the naive pattern measured in the same run:
`ray start --head` with defaults, a driver connecting with address="auto", then stopping
with Ray's default drain (emulated by SIGTERM to that head's own processes only, because
the CLI's stop command would stop every Ray cluster on the host). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from curator_array.execution.ray_cluster import session_members  # noqa: E402
from curator_array.execution.ray_internals.launcher import ray_executable  # noqa: E402

ENTRYPOINT = REPO / "entrypoints" / "curator-array-entrypoint"
SAMPLE = REPO / "sample_data" / "jsonl"
RUNS_ONE_NODE = 7


def wait_gone(sessions: list[int], timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(session_members(s) for s in sessions):
        time.sleep(0.02)
    return time.time()


def run_entrypoint(nodes: int, work: Path) -> dict[str, float]:
    stamp = work / "stamp"
    base = dict(
        os.environ, INPUT_DIR=str(SAMPLE), OUTPUT_DIR=str(work / "out"), BENCH_STAMP_FILE=str(stamp),
        SLURM_JOB_ID=str(90000 + nodes), SLURM_ARRAY_JOB_ID="90000", SLURM_ARRAY_TASK_ID="0",
        SLURM_ARRAY_TASK_COUNT="1", SLURM_JOB_NUM_NODES=str(nodes), SLURM_JOB_NODELIST=f"bench[1-{nodes}]",
        SLURM_STEP_ID="0", PYTHONPATH=str(REPO),
    )
    args = [str(ENTRYPOINT), "--pipeline", "bench.startup_pipeline:build", "--num-cpus", "1",
            "--object-store-memory", str(100 * 2**20), "--no-progress"]
    began = time.time()
    procs = [
        subprocess.Popen(args, env=dict(base, SLURM_NODEID=str(i), SLURMD_NODENAME=f"bench{i + 1}"), cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        for i in range(nodes)
    ]
    driver_exit = None
    while driver_exit is None:
        if procs[0].poll() is not None:
            driver_exit = time.time()
            if procs[0].returncode:
                raise RuntimeError("entrypoint failed")
        time.sleep(0.005)
    for proc in procs:
        proc.wait(timeout=120)
    gone = wait_gone([p.pid for p in procs])
    manifest = json.loads((work / "out" / ".nemo_curator_metadata" / ".slurm_array_completion"
                           / "completed_slurm_array_0.json").read_text())
    phases = manifest["timeline_s"]
    return {**phases, "first_task_stamp": float(stamp.read_text()) - began, "driver_exit": driver_exit - began,
            "ray_gone": gone - began}


NAIVE_DRIVER = r"""
import sys, ray
from curator_array.pipelines.options import PipelineOptions
from curator_array.run.prepare import prepare_shard
from curator_array.run.runner import run_prepared
from curator_array.execution.ray_data import RayDataExecutor
from curator_array.slurm.jobenv import JobEnvironment
from bench.startup_pipeline import build
from curator_array.pipelines.pipeline import Pipeline
ray.init(address="auto", logging_level="ERROR")
options = PipelineOptions(sys.argv[1], sys.argv[2])
pipeline = Pipeline.from_stages(build(options), options)
job = JobEnvironment.from_env({})
run_prepared(prepare_shard(pipeline, sys.argv[2], None), RayDataExecutor(progress_bars=False).execute, job, job.attempt_id())
"""


def run_naive(work: Path) -> tuple[float, float]:
    temp = Path(tempfile.mkdtemp(prefix="nv-"))
    env = dict(os.environ, BENCH_STAMP_FILE=str(work / "stamp"), PYTHONPATH=str(REPO), RAY_AUTH_MODE="disabled")
    began = time.time()
    head = subprocess.Popen([ray_executable(), "start", "--head", "--block", f"--temp-dir={temp}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    while not list(temp.glob("session_latest")):
        time.sleep(0.05)
    time.sleep(1.0)  # what scripts typically do: wait a little for the head before connecting
    subprocess.run([sys.executable, "-c", NAIVE_DRIVER, str(SAMPLE), str(work / "out")], env=env, cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ended = time.time()
    for pid in session_members(head.pid):
        os.kill(pid, signal.SIGTERM)
    gone = wait_gone([head.pid], timeout=120)
    return float((work / "stamp").read_text()) - began, gone - ended


def import_ray_s() -> float:
    """This machine's speed right now, as one figure: a fresh interpreter importing Ray (best of 3).

    Start-up is CPU-bound on 2 cores and this VM's speed drifts by tens of percent between
    sessions; printed beside the figures, it tells a slower run from a slower machine.
    """
    times = []
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import ray"], check=True)
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> None:
    reference = import_ray_s()
    rows, spread = {}, {}
    for label, nodes, count in (("1 node", 1, RUNS_ONE_NODE), ("2 nodes", 2, 3)):
        runs = []
        for _ in range(count):
            with tempfile.TemporaryDirectory() as tmp:
                runs.append(run_entrypoint(nodes, Path(tmp)))
        rows[label] = min(runs, key=lambda r: r["first_task_stamp"])
        spread[label] = sorted(r["first_task_stamp"] for r in runs)
    with tempfile.TemporaryDirectory() as tmp:
        naive = run_naive(Path(tmp))
    print(f"per array task, the run with the earliest first task ({RUNS_ONE_NODE} runs on 1 node, 3 on 2), "
          "seconds since the process started (its manifest's timeline_s):")
    print(f"{'':10}{'head launched':>14}{'prepared':>10}{'Ray ready':>11}{'first task':>12}{'last task':>11}"
          f"{'exit':>7}{'Ray gone':>10}")
    for label, r in rows.items():
        print(f"{label:<10}{r.get('head_launched', float('nan')):>14.2f}{r['prepared']:>10.2f}{r['ray_ready']:>11.2f}"
              f"{r['first_task_stamp']:>12.2f}{r['last_result']:>11.2f}{r['driver_exit']:>7.2f}{r['ray_gone']:>10.2f}")
    for label, times in spread.items():
        print(f"{label}: first task in every run: {', '.join(f'{t:.2f}' for t in times)} "
              f"(median {statistics.median(times):.2f})")
    one = rows["1 node"]
    print(f"1 node: {one['first_task_stamp']:.1f} s to the first task at best, "
          f"{statistics.median(spread['1 node']):.1f} s in the median run (goal <= 3), "
          f"{one['driver_exit'] - one['last_result']:.1f} s from the last task to exit (goal <= 1)")
    print(f"naive `ray start` + address='auto' driver + default stop: {naive[0]:.1f} s to the first task, "
          f"{naive[1]:.1f} s to stop")
    print(f"ratio to the naive pattern, this run: first task {one['first_task_stamp'] / naive[0]:.2f}, "
          f"stop {(one['ray_gone'] - one['last_result']) / naive[1]:.2f}")
    print(f"machine reference: `import ray` in a fresh interpreter took {reference:.2f} s in this run")
    print("NeMo Curator's RayClient on this machine (figures from issue 14, not re-measured): 6.8-7.3 s to start, "
          "5.0 s to stop")


if __name__ == "__main__":
    main()

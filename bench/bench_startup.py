"""Per array task: seconds from entrypoint start to the first source task processed, and from
the driver's end (its completion manifest) to all Ray processes gone; 1 node and 2 nodes.

The two nodes run as two entrypoint processes with the variables srun gives each node
(SLURM_NODEID 0 and 1), on this host. Beside it, the naive pattern measured in the same run:
`ray start --head` with defaults, a driver connecting with address="auto", then stopping
with Ray's default drain (emulated by SIGTERM to that head's own processes only, because
the CLI's stop command would stop every Ray cluster on the host). Prints figures; asserts nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from curator_array.ray_cluster import ray_executable, session_members  # noqa: E402

ENTRYPOINT = REPO / "entrypoints" / "curator-array-entrypoint"
SAMPLE = REPO / "sample_data" / "jsonl"


def wait_gone(sessions: list[int], timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(session_members(s) for s in sessions):
        time.sleep(0.02)
    return time.time()


def run_entrypoint(nodes: int, work: Path) -> tuple[float, float]:
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
    manifest = work / "out" / ".nemo_curator_metadata" / ".slurm_array_completion" / "completed_slurm_array_0.json"
    while not manifest.exists():
        if any(p.poll() not in (None, 0) for p in procs):
            raise RuntimeError("entrypoint failed")
        time.sleep(0.01)
    ended = manifest.stat().st_mtime
    for proc in procs:
        proc.wait(timeout=120)
    gone = wait_gone([p.pid for p in procs])
    return float(stamp.read_text()) - began, gone - ended


NAIVE_DRIVER = r"""
import sys, ray
from curator_array.pipeline import PipelineOptions
from curator_array.prepare import prepare_shard
from curator_array.runner import run_prepared
from curator_array.ray_data import RayDataExecutor
from curator_array.checkpoint import AttemptId
from curator_array.jobenv import JobEnvironment
from bench.startup_pipeline import build
from curator_array.pipeline import Pipeline
ray.init(address="auto", logging_level="ERROR")
options = PipelineOptions(sys.argv[1], sys.argv[2])
pipeline = Pipeline.from_stages(build(options), options)
job = JobEnvironment.from_env({})
run_prepared(prepare_shard(pipeline, sys.argv[2], None), RayDataExecutor(progress_bars=False).execute, job, AttemptId.from_job(job))
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


def main() -> None:
    rows = []
    for label, func in (("1 node", lambda w: run_entrypoint(1, w)), ("2 nodes", lambda w: run_entrypoint(2, w)),
                        ("naive ray start/stop", run_naive)):
        with tempfile.TemporaryDirectory() as tmp:
            startup, teardown = func(Path(tmp))
        rows.append((label, startup, teardown))
    print("per array task            startup→first task   driver end→Ray gone")
    for label, startup, teardown in rows:
        print(f"{label:<26}{startup:8.1f}s             {teardown:8.1f}s")
    print("goals: startup <= 6 s (1 node), <= 10 s (2 nodes); teardown <= 2 s")


if __name__ == "__main__":
    main()

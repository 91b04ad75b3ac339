"""The throwaway SLURM cluster, started once per test session (scripts/slurm_cluster.py)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from curator_array.core.arrays import parse_array_expression
from tests.conftest import REPO, SAMPLE, need

ENTRYPOINT = REPO / "entrypoints" / "curator-array-entrypoint"
CLUSTER_SCRIPT = REPO / "scripts" / "slurm_cluster.py"
# Small on purpose, so `submit --max-array-size auto` must split runs into windows.
MAX_ARRAY_SIZE = 5


def start_cluster(*extra: str) -> dict[str, str]:
    """Start (or keep) the throwaway cluster; the variables it prints (SLURM_CONF, CURATOR_ARRAY_PYXIS)."""
    started = subprocess.run([sys.executable, str(CLUSTER_SCRIPT), "start", "--nodes", "3", "--max-array-size",
                              str(MAX_ARRAY_SIZE), *extra], capture_output=True, text=True)
    need(started.returncode == 0, f"the throwaway SLURM cluster did not start: {started.stderr.strip()}")
    return dict(line[len("export "):].split("=", 1) for line in started.stdout.splitlines() if line.startswith("export "))


@pytest.fixture(scope="session")
def slurm_cluster():
    can_install = os.geteuid() == 0 and shutil.which("apt-get") is not None
    need(shutil.which("slurmctld") is not None or can_install, "SLURM is not installed and cannot be (needs root + apt)")
    # pyxis mounts images (use_squashfuse=1): a step starts in 0.3 s instead of 3-20 s of unpacking.
    variables = start_cluster("--squashfuse")
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = variables["SLURM_CONF"]
    yield variables["SLURM_CONF"]
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous


@contextmanager
def pyxis_mode(mode: str) -> Iterator[None]:
    """Run a block with pyxis unpacking images per step (``create``, its default) or mounting them."""
    subprocess.run([sys.executable, str(CLUSTER_SCRIPT), "pyxis-mode", mode], check=True)
    try:
        yield
    finally:
        subprocess.run([sys.executable, str(CLUSTER_SCRIPT), "pyxis-mode", "squashfuse"], check=True)


def cluster_script():
    """scripts/slurm_cluster.py as a module (what it finds, what it writes)."""
    spec = importlib.util.spec_from_file_location("slurm_cluster", CLUSTER_SCRIPT)
    module = sys.modules["slurm_cluster"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def pyxis(slurm_cluster) -> bool:
    """The session cluster with the real pyxis plugin loaded, where a site installed it.

    pyxis and enroot are the one component no registry here has, so their tests skip where
    they are not installed, in CI too (docs/development.md)."""
    if "PlugStackConfig=" not in Path(slurm_cluster).read_text():
        pytest.skip(cluster_script().missing_pyxis())
    return True


def copy_sample(tmp_path_factory) -> Path:
    """A fresh copy of the bundled JSONL sample in a directory every node can read."""
    target = tmp_path_factory.mktemp("input") / "jsonl"
    shutil.copytree(SAMPLE / "jsonl", target)
    return target


SLOW = "--pipeline tests.slurm.slow_pipeline:build --output-file-type parquet"


@pytest.fixture(scope="session")
def slow_baseline(slurm_cluster, tmp_path_factory) -> Path:
    """An uninterrupted 2-element run of the slow pipeline (Parquet): what every interrupted,
    retried run must equal byte for byte (outputs are named by task, whatever the shard count)."""
    data = copy_sample(tmp_path_factory)
    out = tmp_path_factory.mktemp("baseline") / "out"
    script = job_script(out.parent / "job.sh", f"cd {REPO}\n{entrypoint_line(SLOW)}")
    job = sbatch(script, "--array=0-1", env={"INPUT_DIR": str(data), "OUTPUT_DIR": str(out), "SLOW_SECONDS": "0.1"})
    assert set(wait_for(job, 2).values()) == {"COMPLETED"}
    return out


@pytest.fixture(scope="module")
def sample_data_module(tmp_path_factory) -> Path:
    """The bundled JSONL sample, copied once per module (jobs read it from every node)."""
    return copy_sample(tmp_path_factory)


def sbatch(script: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Submit with sbatch options and, after the script, its own arguments (from the first
    argument that is not an sbatch option, e.g. run options after ``--array=...``)."""
    options = [a for a in args if a.startswith("--array") or a.startswith("--nodes") or a.startswith("--nodelist")]
    script_args = [a for a in args if a not in options]
    full_env = dict(os.environ, **(env or {}))
    result = subprocess.run(["sbatch", "--parsable", *options, str(script), *script_args], capture_output=True,
                            text=True, env=full_env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split(";")[0]


class JobCompLog:
    """The jobcomp log's records of ended jobs, read on from where the last call stopped.

    The log holds every job the cluster ever ran (megabytes after a few sessions); reading
    it whole at every poll cost 0.1 s of CPU each time."""

    def __init__(self):
        self.file: tuple[int, int] | None = None  # (device, inode) read so far
        self.offset = 0
        self.records: dict[str, dict[str, dict[str, str]]] = {}  # job id → element (or job id) → its fields

    def ended(self, job_id: str) -> dict[str, dict[str, str]]:
        """Element (or job id) → the fields of its last record (JobState, ExitCode, ...)."""
        self._read_on(Path(os.environ["SLURM_CONF"]).parent.parent / "log" / "jobcomp.txt")
        return dict(self.records.get(job_id, {}))

    def _read_on(self, path: Path) -> None:
        try:
            with path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                if (stat.st_dev, stat.st_ino) != self.file or stat.st_size < self.offset:
                    self.file, self.offset, self.records = (stat.st_dev, stat.st_ino), 0, {}
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return
        complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written is read next time
        self.offset += len(complete)
        for line in complete.decode().splitlines():
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            job, array = fields.get("JobId"), fields.get("ArrayJobId")
            if array:
                self.records.setdefault(array, {})[fields.get("ArrayTaskId") or array] = fields
            if job and job != array:
                self.records.setdefault(job, {})[job] = fields


JOBCOMP = JobCompLog()


def finished_states(job_id: str) -> dict[str, str]:
    """Array element (or job) → final state, from the jobcomp log."""
    return {element: fields["JobState"] for element, fields in JOBCOMP.ended(job_id).items()}


def job_states(job_id: str) -> dict[str, str]:
    """Array element (or job) → state, from squeue while queued and the jobcomp log after."""
    states = finished_states(job_id)
    out = subprocess.run(["squeue", "-h", "-r", "-j", job_id, "-o", "%i %T"], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        ident, state = line.split()
        states[ident.split("_", 1)[1] if "_" in ident else ident] = state
    return states


FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")
POLL_S, ASK_SQUEUE_EVERY = 0.2, 5  # the log every 0.2 s; squeue (a process, an RPC) once a second at most


def wait_for(job_id: str, count: int, timeout: float = 300.0) -> dict[str, str]:
    """Wait until ``count`` elements of the job are finished; returns their final states.
    Elements cancelled while pending end in one record under the job's own id, not one each.

    squeue is asked once the jobcomp log shows ``count`` elements ended (and every second
    anyway): a test then waits about 0.1 s past the job's end, not half a second of polling."""
    deadline = time.monotonic() + timeout
    polls = 0
    while time.monotonic() < deadline:
        ended = finished_states(job_id)
        if len(ended) >= count or job_id in ended or polls % ASK_SQUEUE_EVERY == 0:
            states = job_states(job_id)
            done = {k: v for k, v in states.items() if v.split()[0] in FINAL_STATES}
            if (len(done) >= count or job_id in done) and len(states) == len(done):
                return done
        polls += 1
        time.sleep(POLL_S)
    raise AssertionError(f"job {job_id} not finished after {timeout:.0f}s: {job_states(job_id)}")


def job_script(path: Path, body: str, sbatch_lines: tuple[str, ...] = ()) -> Path:
    lines = ["#!/bin/bash", "#SBATCH --cpus-per-task=1", f"#SBATCH --output={path.parent}/slurm_%A_%a.out", *sbatch_lines, body]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


def entrypoint_line(*extra: str, nodes_arg: str = "") -> str:
    args = " ".join(["--num-cpus 1", f"--object-store-memory {100 * 2**20}", "--no-progress", *extra])
    return f"srun --ntasks-per-node=1 {ENTRYPOINT} {args}"


def queued(output: str) -> list[tuple[str, str, int]]:
    """(job id, phase, elements) of each window `submit` or `retry --submit` printed."""
    jobs = []
    for line in output.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            count = len(parse_array_expression(parts[1].removeprefix("--array=")))
            jobs.append((parts[0], parts[parts.index("phase") + 1] if "phase" in parts else "curation", count))
    return jobs


def wait_all(jobs: list[tuple[str, str, int]]) -> None:
    for job, _, count in jobs:
        wait_for(job, count, timeout=300)

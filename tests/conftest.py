"""Shared test helpers.

Tests use real components. Where one cannot be had, ``need()`` skips with the reason on a
developer machine and fails under CI (``CI=true``), so CI never passes by skipping.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# The tests on the one throwaway SLURM cluster and dockerd run one after another in one
# xdist worker (some stop a node's slurmd, some need two idle nodes, all share one image
# build); the other modules spread over the remaining workers, each module in one worker.
SHARED_SERVICE_DIRS = ("tests/slurm/", "tests/container/")
SHARED_SERVICES = frozenset({"slurm_cluster", "docker_client"})


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SharedServicesInOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "shared-services" if nodeid.startswith(SHARED_SERVICE_DIRS) else super()._split_scope(nodeid)

    return SharedServicesInOneWorker(config, log)


def pytest_configure(config):
    from tests.support import crash_rerun, watchdog

    config.pluginmanager.register(watchdog, "session-watchdog")
    config.pluginmanager.register(crash_rerun, "crash-rerun")


def pytest_collection_modifyitems(config, items):
    """A test elsewhere that starts a shared service would run beside the ones that stop it."""
    strays = [item.nodeid for item in items
              if SHARED_SERVICES & set(item.fixturenames) and not item.nodeid.startswith(SHARED_SERVICE_DIRS)]
    if strays:
        raise pytest.UsageError(f"tests using the shared SLURM cluster or dockerd belong under "
                                f"{' or '.join(SHARED_SERVICE_DIRS)}: {', '.join(strays)}")


def need(condition: bool, reason: str) -> None:
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required component missing in CI: {reason}")
    pytest.skip(reason)


def read_records(directory: Path) -> list[dict]:
    """Every record of every output file (JSONL or Parquet) under ``directory``."""
    records = []
    for path in sorted(Path(directory).iterdir()):
        if path.name.startswith("."):
            continue
        if path.suffix == ".parquet":
            records += pq.read_table(path).to_pylist()
        elif path.suffix == ".jsonl":
            records += [json.loads(line) for line in path.read_text().splitlines() if line]
    return records


def records_digest(records: list[dict]) -> str:
    lines = sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def visible_files(directory: Path) -> list[str]:
    return sorted(p.name for p in Path(directory).iterdir() if not p.name.startswith("."))


@pytest.fixture
def sample_jsonl(tmp_path) -> Path:
    target = tmp_path / "input jsonl"
    shutil.copytree(SAMPLE / "jsonl", target)
    return target


@pytest.fixture
def sample_parquet(tmp_path) -> Path:
    target = tmp_path / "input parquet"
    shutil.copytree(SAMPLE / "parquet", target)
    return target


# An error-level line from Ray: glog's "[time E pid tid]" (C++) or Ray's Python "time<TAB>ERROR",
# as the driver prints it or as it forwards a worker's, "(name pid=N) " first.
RAY_ERROR_LINE = re.compile(r"^(?:\([^)]*\) )?(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ E \d+ \d+\]|"
                            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\tERROR )", re.M)


def ray_errors(output: str) -> list[str]:
    """Ray's error-level lines in a run's output (a run that succeeded must have none)."""
    return [line for line in output.splitlines() if RAY_ERROR_LINE.match(line)]


def curator_cli(*args: str, env: dict[str, str] | None = None, check: bool = True,
                cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``curator-array ARGS`` in a subprocess of this interpreter; with ``check``, it must succeed.
    Whatever succeeds must print no error-level line of Ray's."""
    done = subprocess.run([sys.executable, "-m", "curator_array.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, cwd=cwd)
    return _checked(done, check)


def _checked(done: subprocess.CompletedProcess, check: bool) -> subprocess.CompletedProcess:
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    if done.returncode == 0:
        assert not ray_errors(done.stderr), f"Ray printed error-level lines in a run that succeeded: {ray_errors(done.stderr)}"
    return done


@pytest.fixture(scope="module")
def run_cluster():
    """One Ray cluster per test module, as ``run`` starts one on a node of one CPU (as the SLURM
    tests' elements have), this process its driver. Every Ray worker imports Ray Data (about
    2.5 CPU-s) and the host's cores are already busy with the other test worker, so more CPUs
    only add workers; pools of several are checked on clusters of their own (``ray_cluster``,
    ``two_node_cluster``, ``curator_cli``)."""
    from curator_array.execution.clients import RayClient
    from curator_array.run.request import RunRequest
    from curator_array.slurm.jobenv import JobEnvironment

    request = RunRequest.from_flags({"input_dir": "-", "output_dir": "-", "object_store_memory": 300 * 2**20,
                                     "num_cpus": 1})
    with RayClient(node_options=request.node_options(JobEnvironment.from_env({}))) as client:
        yield client


def curator_here(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """``curator_cli`` in this process, on the module's ``run_cluster`` (tests.support.in_process
    says which tests may)."""
    import ray

    from tests.support.in_process import curator_in_process

    assert ray.is_initialized(), "curator_here runs on the module's cluster: mark the module usefixtures('run_cluster')"
    return _checked(curator_in_process(*args, env=env), check)

"""Dedup phases on the real SLURM cluster: queued by one `submit`, each phase after the one
before; an element SIGKILLed in every phase, and a whole phase cancelled, and each time
`retry` names exactly what is missing and one resubmission finishes the run, with the
output of an uninterrupted run. With the clusters found by four elements in rounds, an
element killed in a middle round and the later rounds cancelled: `retry --submit` resumes
at that round, with the output of one clusters element.

The elements run through a bare-metal site rendered from the real templates (this
checkout's venv), with real sbatch, srun, the entrypoint and, for curation, Ray.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from curator_array.run.phases.components import STEPS_QUEUED
from tests.conftest import REPO, curator_cli, curator_here
from tests.slurm.conftest import finished_states, queued, wait_all
from tests.slurm.test_faults import render_test_site
from tests.support.planted import write_corpus, write_doubled_corpus

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
GRANTED = ["--object-store-memory", str(100 * 2**20), "--no-progress"]  # the CPUs are the site's cpus_per_task
SMALL = ["--num-cpus", "1", *GRANTED]
DEDUP = ["--dedup", "fuzzy", "--dedup-buckets", "2"]
PHASES = ("signatures", "buckets", "clusters", "removal")
HOLD = "CURATOR_ARRAY_TEST_HOLD_ELEMENT"  # read by tests/support/hold/sitecustomize.py, on the elements' PYTHONPATH
PYTHONPATH = os.pathsep.join([str(REPO), str(REPO / "tests" / "support" / "hold")])


def curator(*args: str, env: dict[str, str] | None = None, check: bool = True, cwd: Path | None = None):
    return curator_cli(*args, env={"PYTHONPATH": PYTHONPATH, **(env or {})}, check=check, cwd=cwd)


def local_run(*args: str, env: dict[str, str] | None = None) -> None:
    """The uninterrupted run an array's output is compared with, in this process (on the
    module's ``run_cluster``): the array's elements are what these tests start on SLURM."""
    curator_here("run", *args, env=env)


def local_and_array(inputs: Path, root: Path, sites: Path, *args: str, shards: int = 4,
                    phases: tuple[str, ...] = ("curation",)) -> tuple[Path, Path]:
    """A local run of ``args`` on ``inputs`` (``root/baseline``) and a ``shards``-element array of
    the same through the test site (``root/out``), both finished; the array queued ``phases``."""
    baseline, out = root / "baseline", root / "out"
    local_run("--input-dir", str(inputs), "--output-dir", str(baseline), *args)
    done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", str(shards), "--",
                   "--input-dir", str(inputs), "--output-dir", str(out), *args, cwd=sites)
    jobs = queued(done.stdout)
    assert [p for _, p, _ in jobs] == list(phases) and jobs[0][2] == shards, done.stdout
    wait_all(jobs)
    return baseline, out


def visible(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.name.startswith(".")}


def kill_when_held(marker: Path, jobs: list[tuple[str, str, int]], phase: str, timeout: float = 240) -> None:
    """SIGKILL element 0 of ``phase`` once it holds mid-work (it wrote ``marker``)."""
    job = next(j for j, p, _ in jobs if p == phase)
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert time.monotonic() < deadline, f"{phase} element 0 never started"
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=KILL", "--full", f"{job}_0"], check=True, capture_output=True)


@pytest.fixture(scope="module")
def planted_run(slurm_cluster, tmp_path_factory):
    """The planted corpus, a bare-metal site, and the output of an uninterrupted local run."""
    root = tmp_path_factory.mktemp("dedup-slurm")
    inputs = root / "in"
    write_corpus(inputs)
    sites = root / "sites"
    sites.mkdir()
    render_test_site(sites, cpus_per_task=2)
    baseline = root / "baseline"
    local_run("--input-dir", str(inputs), "--output-dir", str(baseline), *SMALL, *DEDUP)
    return inputs, sites, visible(baseline)


def submit_run(inputs: Path, sites: Path, out: Path, env: dict[str, str]) -> list[tuple[str, str, int]]:
    done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", "3", "--",
                   "--input-dir", str(inputs), "--output-dir", str(out), *GRANTED, *DEDUP, env=env, cwd=sites)
    jobs = queued(done.stdout)
    assert [p for _, p, _ in jobs] == ["curation", *PHASES], done.stdout
    return jobs


def retry_fields(out: Path) -> str:
    return curator("retry", "--checkpoint-path", str(out), "--format", "fields").stdout.strip()


def test_an_element_killed_in_each_phase_is_retried_to_the_uninterrupted_output(planted_run, tmp_path):
    inputs, sites, baseline = planted_run
    out = tmp_path / "out"
    markers = {phase: tmp_path / f"held-{phase}" for phase in PHASES}
    jobs = submit_run(inputs, sites, out, {HOLD: f"signatures:0:{markers['signatures']}"})
    kill_when_held(markers["signatures"], jobs, "signatures")
    wait_all(jobs)
    elements = {"signatures": 3, "buckets": 2, "clusters": 1, "removal": 3}
    for number, phase in enumerate(PHASES):
        assert retry_fields(out) == f"0 0 0 {elements[phase]} {phase}", f"after the kill in {phase}"
        status = curator("status", "--checkpoint-path", str(out)).stdout
        for later in PHASES[number + 1:]:
            assert f"blocked by {phase} (missing 0)" in status.split(f"  {later}")[1].splitlines()[0], status
        following = PHASES[number + 1] if number + 1 < len(PHASES) else None
        env = {HOLD: f"{following}:0:{markers[following]}"} if following else {}
        done = curator("retry", "--checkpoint-path", str(out), "--submit", "--site", "test-site", "--sites-dir",
                       str(sites), env=env, cwd=sites)
        jobs = queued(done.stdout)
        assert [(p, n) for _, p, n in jobs] == [(phase, 1), *[(p, elements[p]) for p in PHASES[number + 1:]]]
        if following:
            kill_when_held(markers[following], jobs, following)
        wait_all(jobs)
    assert all(marker.exists() for marker in markers.values()), "every phase had an element killed"
    assert retry_fields(out) == ""
    report = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    assert [p["complete"] for p in report["phases"]] == [3, 2, 1, 3]
    assert visible(out) == baseline, "the same files, byte for byte, as an uninterrupted run on one CPU"
    logs = "".join(log.read_text() for log in sites.glob("*.out"))
    for phase in ("signatures", "removal"):
        assert f"{phase} element 1 of 0..2: starting over 2 CPU(s)" in logs, f"{phase} spread over cpus_per_task"


def test_a_cancelled_phase_blocks_the_later_ones_visibly_and_one_retry_finishes(planted_run, tmp_path):
    inputs, sites, baseline = planted_run
    out = tmp_path / "out"
    jobs = submit_run(inputs, sites, out, {})
    buckets = next(job for job, phase, _ in jobs if phase == "buckets")
    subprocess.run(["scancel", buckets], check=True, capture_output=True)
    wait_all([j for j in jobs if j[0] != buckets])
    status = curator("status", "--checkpoint-path", str(out)).stdout
    assert "buckets    0/2; missing 0-1" in status
    assert "clusters   0/1; missing 0; blocked by buckets (missing 0-1)" in status
    assert "element 0 failed: clusters element 0 cannot start: buckets element(s) 0-1" in status, \
        "the later phases ran, found their input missing and ended at once (afterany), not waiting forever"
    assert retry_fields(out) == "0-1 0 0 2 buckets"
    done = curator("retry", "--checkpoint-path", str(out), "--submit", "--site", "test-site", "--sites-dir",
                   str(sites), cwd=sites)
    wait_all(queued(done.stdout))
    assert retry_fields(out) == ""
    assert visible(out) == baseline


def test_components_over_four_elements_killed_mid_round_resume_to_one_elements_output(slurm_cluster, tmp_path):
    """Four components elements in rounds: element 0 SIGKILLed in step 1 and the later windows
    cancelled; status names the step and the element it waits for, and one `retry --submit`
    finishes the run with the files one clusters element writes; the element that completes the
    phase cancels the windows still queued."""
    inputs, sites = tmp_path / "in", tmp_path / "sites"
    write_doubled_corpus(inputs)
    sites.mkdir()
    render_test_site(sites)
    baseline, out, marker = tmp_path / "baseline", tmp_path / "out", tmp_path / "held"
    local_run("--input-dir", str(inputs), "--output-dir", str(baseline), *SMALL, *DEDUP)
    done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", "2", "--",
                   "--input-dir", str(inputs), "--output-dir", str(out), *SMALL, *DEDUP,
                   "--dedup-components-elements", "4",
                   env={HOLD: f"components:0:{marker}", "CURATOR_ARRAY_TEST_HOLD_AT": "1"}, cwd=sites)
    jobs = queued(done.stdout)
    rounds = [job for job, phase, count in jobs if phase == "components"]
    assert len(rounds) == STEPS_QUEUED and all(n == 4 for _, p, n in jobs if p == "components")
    deadline = time.monotonic() + 240
    while not marker.exists():  # element 0 holds as its step 1 starts: in the second window
        assert time.monotonic() < deadline, "components element 0 never reached step 1"
        time.sleep(0.2)
    subprocess.run(["scancel", *rounds[2:]], check=True, capture_output=True)  # as if preempted
    subprocess.run(["scancel", "--signal=KILL", "--full", f"{rounds[1]}_0"], check=True, capture_output=True)
    wait_all([job for job in jobs if job[0] not in rounds[2:]])
    status = curator("status", "--checkpoint-path", str(out)).stdout
    line = next(line for line in status.splitlines() if line.strip().startswith("components"))
    assert "0/4; missing 0-3; step 1 (small-star): 3/4 done, waits for element(s) 0" in line, status
    assert retry_fields(out) == "0-3 0 0 4 components"
    done = curator("retry", "--checkpoint-path", str(out), "--submit", "--site", "test-site", "--sites-dir",
                   str(sites), cwd=sites)
    retried = queued(done.stdout)
    wait_all(retried)
    assert retry_fields(out) == ""
    windows = [finished_states(job) for job, phase, _ in retried if phase == "components"]
    never_ran = [states for (job, _, _), states in zip(retried, windows) if states == {job: "CANCELLED"}]
    assert never_ran and windows[-len(never_ran):] == never_ran, "the windows after the phase completed never ran"
    assert "components is complete: cancelled its windows still queued" in "".join(
        log.read_text() for log in sites.glob("*.out"))
    report = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    assert all(p["failed"] == {} for p in report["phases"]), "no element refused to start, none failed"
    components = next(p for p in report["phases"] if p["phase"] == "components")
    assert components["complete"] == 4 and components["counts"]["steps"] >= 3
    assert visible(out) == visible(baseline), "the same files, byte for byte, as one clusters element"

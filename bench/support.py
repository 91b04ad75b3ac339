"""What several benchmarks share: cache paths, datatrove in its own site dir, timing and
peak-memory measurement of a Python snippet in a fresh process."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "bench"
SITE = REPO / ".cache" / "bench-site"
CACHE.mkdir(parents=True, exist_ok=True)
# Real pages (Debian's documentation) for the benches that read WARCs: see real_page_warcs.
REAL_PAGES = REPO / "tests" / "fixtures" / "fineweb-pages.jsonl.gz"
DATATROVE_PACKAGES = ("datatrove>=0.4", "regex", "orjson", "warcio", "faust-cchardet", "python-magic")

# Appended to every measured snippet: the process's own peak RSS and its children's. Its own
# is VmHWM: ru_maxrss would carry over the peak of the bench process it was forked from.
_REPORT = """
import json as _json, resource as _resource


def _peak_rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


print("@@" + _json.dumps({"peak_rss": _peak_rss(),
                          "children_peak_rss": _resource.getrusage(_resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
                          **globals().get("REPORT", {})}))
"""


ROUNDS = 3


@dataclass
class Turns:
    """One engine's wall times over the rounds and the largest peak memory (MiB) it reached."""

    walls: list[float] = field(default_factory=list)
    peak: float = 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.walls)

    def __str__(self) -> str:
        return "/".join(f"{wall:.1f}" for wall in self.walls)


def real_page_warcs(files: int, copies: int = 1) -> tuple[Path, int]:
    """``files`` WARCs, each holding every real fixture page ``copies`` times under URLs of its
    own; (directory, pages).

    Built once under the cache. Real pages weigh what a crawl's do (markup, scripts, long
    menus), which the synthetic pages of ``bench_web`` do not: per page, the commoncrawl chain's
    stages spend 3 to 4 times the CPU on these. With ``copies``, a WARC reaches a crawl's
    size (30,000 to 46,000 pages).
    """
    from tests.support.warcs import Page, write_warc

    directory = CACHE / "fineweb" / (f"warcs-{files}" if copies == 1 else f"warcs-{files}x{copies}")
    marker = directory / ".complete"  # holds the page count, so a built input is not read again
    if marker.exists() and marker.read_text().strip():
        return directory, int(marker.read_text())
    with gzip.open(REAL_PAGES, "rt", encoding="utf-8") as handle:
        pages = [json.loads(line) for line in handle]
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for index in range(files):
        write_warc(directory / f"part-{index:02d}.warc.gz",
                   [Page(f"https://docs{index}.example.org/{f'{copy}/' if copies > 1 else ''}"
                         f"{p['name'].replace('/', '-')}", p["html"].encode())
                    for copy in range(copies) for p in pages])
    marker.write_text(f"{files * copies * len(pages)}\n")
    return directory, files * copies * len(pages)


def in_turns(engines: dict[str, Callable[[], tuple[float, float]]], rounds: int = ROUNDS) -> dict[str, Turns]:
    """Run each engine once per round, the engines taking turns, so that a slow moment of this
    shared host hits all of them rather than one; an engine returns (wall s, peak MiB). A single
    run's time moved by a quarter between hours here."""
    turns = {name: Turns() for name in engines}
    for _ in range(rounds):
        for name, engine in engines.items():
            wall, peak = engine()
            turns[name].walls.append(wall)
            turns[name].peak = max(turns[name].peak, peak)
    return turns


def ensure_datatrove() -> None:
    """datatrove, the comparison point, goes into .cache/bench-site, never into .venv."""
    marker = SITE / ".complete"
    if marker.exists() and marker.read_text() == " ".join(DATATROVE_PACKAGES):
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(SITE), *DATATROVE_PACKAGES],
                   check=True)
    marker.write_text(" ".join(DATATROVE_PACKAGES))


def datatrove_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(SITE), str(REPO), os.environ.get("PYTHONPATH", "")]))


def datatrove_fineweb_env(work: Path) -> dict[str, str]:
    """The environment datatrove's FineWeb steps (``tests.support.reference_fineweb``) run in:
    the reference site's packages, our bundled fastText model for its language filter, and
    caches under ``work`` (nothing is downloaded)."""
    sys.path.insert(0, str(REPO))
    from curator_array.stages.web.fasttext_language import bundled_model
    from tests.support.reference_site import ensure_reference_site, reference_environment

    ensure_reference_site()
    env = reference_environment()  # its WARC reader's own needs (warcio, ...) from the bench's datatrove site
    env.update(PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "support" / "reference_lid"), env["PYTHONPATH"],
                                           str(SITE)]),
               REFERENCE_LID_MODEL=str(bundled_model()), TLDEXTRACT_CACHE=str(work / "tld"),
               TLDEXTRACT_CACHE_TIMEOUT="2", HF_HOME=str(work / "hf"))
    return env


def host_busy_s() -> float:
    """The core-seconds this host has been busy since it booted (``/proc/stat``: user, nice,
    system, irq, softirq). Over one run on an otherwise idle host, the difference is all the
    run cost: its helpers and the kernel's work for it included, which no process's own
    accounting shows."""
    with open("/proc/stat") as handle:
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in handle.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed(command: list[str], env: dict | None = None) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as handle:
                todo += [int(child) for child in handle.read().split()]
        except OSError:
            continue
    return found


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


# Where a bench reports cores busy, its processes hold GiBs (a model per worker): sampling their
# PSS every 0.2 s took about a third of a core from the element measured (30 ms per read of a
# 1.2 GiB worker, two workers), and every 2 s still 0.015-0.025 of a core (31-50 ms a sample of
# the selection element). So those benches time their rounds unsampled (``interval_s=None``)
# and sample a run of their own, every 2 s.
PSS_SAMPLING_BUSY_S = 2.0


def timed_tree(command: list[str], env: dict | None = None, interval_s: float | None = 0.2,
               cwd: Path = REPO) -> tuple[float, float]:
    """Wall time of ``command`` and the peak memory of its whole process tree in MiB (the sum of
    every process's proportional set size, sampled every ``interval_s``: Ray's raylet, workers
    and object store included, shared pages counted once; 0 with ``interval_s`` None, when
    nothing is sampled). Reading a process's PSS costs the kernel about 15-30 ms of CPU per GiB
    the process holds (``PSS_SAMPLING_BUSY_S``)."""
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while interval_s is not None and process.poll() is None:
        peak = max(peak, sum(_pss_bytes(pid) for pid in _descendants(process.pid)))
        try:
            process.wait(timeout=interval_s)  # returns at the exit, not at the next sample
        except subprocess.TimeoutExpired:
            pass
    process.wait()
    wall = time.perf_counter() - began
    if process.returncode:
        raise RuntimeError(f"{command} failed with exit code {process.returncode}")
    return wall, peak / 2**20


def measure_snippet(code: str, *args: str, env: dict | None = None, cwd: Path = REPO) -> dict:
    """Run ``code`` in a fresh interpreter; its wall time, peak RSS and its ``REPORT`` dict."""
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code + _REPORT, *args], capture_output=True, text=True, cwd=cwd,
                            env=env or dict(os.environ, PYTHONPATH=str(REPO)))
    wall = time.perf_counter() - began
    if result.returncode:
        raise RuntimeError(f"benchmark snippet failed:\n{result.stderr[-3000:]}")
    line = next(line for line in result.stdout.splitlines() if line.startswith("@@"))
    return {"wall": wall, **json.loads(line[2:])}


def curator(log: Path, *args: str, shard: tuple[int, int] | None = None) -> tuple[subprocess.Popen, Path]:
    """``curator-array ARGS`` started in the background (as logical shard ``shard``), its output in ``log``."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if shard is not None:
        env.update(NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX=str(shard[0]), NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS=str(shard[1]))
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as handle:
        return subprocess.Popen([sys.executable, "-c", _CLI_REPORTING_PEAK, str(_peak_file(log)), *args], env=env,
                                stdout=handle, stderr=subprocess.STDOUT), log


# The CLI, writing its own VmHWM and its waited-for children's largest peak (MiB) to a file
# as it exits. wait4's ru_maxrss would not do: exec carries the bench process's own peak over
# into it.
_CLI_REPORTING_PEAK = """
import atexit, resource, runpy, sys


def _write_peak(path=sys.argv.pop(1)):
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(path, "w") as out:
        out.write(f"{peak / 1024} {children / 1024}")


atexit.register(_write_peak)
runpy.run_module("curator_array.cli", run_name="__main__", alter_sys=True)
"""


def _peak_file(log: Path) -> Path:
    return log.with_name(log.name + ".peak")


def wait_peak(started: tuple[subprocess.Popen, Path], with_child: bool = False) -> float:
    """Wait for the process; its own peak RSS in MiB (the process alone, not Ray's), plus
    the largest of the children it waited for when ``with_child`` (a process that works
    beside its own single child, as the tokenize element's encoder does)."""
    process, log = started
    process.wait()
    if process.returncode:
        raise RuntimeError(f"{process.args} failed:\n{log.read_text()[-3000:]}")
    own, child = map(float, _peak_file(log).read_text().split())
    return own + child if with_child else own


def baseline_tree(commit: str) -> Path:
    """The package as of ``commit``, unpacked once under the cache, to measure against."""
    tree = CACHE / "baseline" / commit
    if not (tree / "curator_array").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit, "curator_array"], cwd=REPO, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def baseline_module(commit: str, dotted: str):
    """A module of the package as of ``commit``, imported beside today's (as ``baseline_<commit>``),
    so that the same process can time both on the same input."""
    import importlib
    import importlib.util

    name = f"baseline_{commit}"
    if name not in sys.modules:
        package = baseline_tree(commit) / "curator_array"
        spec = importlib.util.spec_from_file_location(name, package / "__init__.py",
                                                      submodule_search_locations=[str(package)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"{name}.{dotted}")


"""How busy each built-in pipeline keeps the element's cores, at realistic size, on 2 cores.

Cores busy = the stages' CPU seconds (as the manifest records them, ``status --json``) over
the element's wall time from process start to exit, measured from outside; ``status``'s own
figure (process start to manifest) beside it. Inputs have the shape users' data has:

- ``commoncrawl`` and ``fineweb``: 8 WARCs of real pages (Debian's documentation with their
  markup, ``support.real_page_warcs``), 20,256 pages;
- ``dclm`` and the default pipeline with ``--decontaminate``: about 1 GB of JSONL of real
  multilingual prose (``real_text``: 25 languages, long-tailed lengths) in 16 files; the
  eval set is 15,000 records of Python's documentation (``bench_decont``), which some
  documents hold.

One element each, ``ROUNDS`` rounds (default 2), the pipelines in turn; prints each one's wall
time, CPU seconds by stage, cores busy and where the element's time went (the manifest's
timeline: Ray ready, first and last result, manifest; ``dclm``'s paragraph dedup phases run
after the manifest, until the exit), and the peak memory from one more run of each, sampled
(the timed runs are not: sampling costs the kernel CPU); asserts nothing.

    .venv/bin/python bench/bench_cores_busy.py [commoncrawl fineweb dclm decontaminate]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decont import eval_records  # noqa: E402
from real_text import write_shard  # noqa: E402
from support import CACHE, PSS_SAMPLING_BUSY_S, REPO, real_page_warcs, timed_tree  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", 2))
WORK = CACHE / "cores-busy"
JSONL = CACHE / "cores-busy-jsonl-16x1000000000"
COMMON = ["--num-cpus", "2", "--no-progress"]


def jsonl_input() -> Path:
    write_shard(JSONL, 16, 1_000_000_000)
    return JSONL


def eval_file() -> Path:
    path = WORK / "evals.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(record) + "\n" for record in eval_records()))
    return path


def runs() -> dict[str, tuple[list[str], Path]]:
    warcs, _ = real_page_warcs(8, 12)
    web = ["--input-dir", str(warcs), "--input-file-type", "warc"]
    return {
        "commoncrawl": (["--pipeline", "commoncrawl", *web], warcs),
        "fineweb": (["--pipeline", "fineweb", *web], warcs),
        "dclm": (["--pipeline", "dclm", "--input-dir", str(jsonl_input()), "--input-file-type", "jsonl"], JSONL),
        "decontaminate": (["--input-dir", str(jsonl_input()), "--input-file-type", "jsonl", "--decontaminate",
                           str(eval_file())], JSONL),
    }


def run_element(out: Path, arguments: list[str], env: dict, interval_s: float | None) -> tuple[float, float]:
    """One element of the pipeline into a fresh ``out``: (wall s, peak MiB, 0 unsampled)."""
    shutil.rmtree(out, ignore_errors=True)
    return timed_tree([sys.executable, "-m", "curator_array.cli", "run", *arguments, *COMMON, "--output-dir", str(out)],
                      env, interval_s=interval_s)


def peak_memory(name: str, arguments: list[str], env: dict) -> float:
    """The process tree's peak PSS (MiB) in a run of its own: sampling it costs the kernel CPU
    that a timed run must not lose (``support.PSS_SAMPLING_BUSY_S``)."""
    _, peak = run_element(WORK / name, arguments, env, PSS_SAMPLING_BUSY_S)
    shutil.rmtree(WORK / name, ignore_errors=True)
    return peak


def measure(name: str, arguments: list[str], env: dict) -> dict:
    out = WORK / name
    wall, _ = run_element(out, arguments, env, None)
    shown = json.loads(subprocess.run([sys.executable, "-m", "curator_array.cli", "status", "--checkpoint-path",
                                       str(out), "--json"], capture_output=True, text=True, env=env,
                                      check=True).stdout)
    manifest = out / ".nemo_curator_metadata" / ".slurm_array_completion" / "completed_slurm_array_0.json"
    timeline = json.loads(manifest.read_text()).get("timeline_s", {})
    stages = {}
    for stage in shown["stages"]:
        stages[stage["stage"]] = stages.get(stage["stage"], 0.0) + stage["cpu_s"]
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": wall, "stages": stages, "status": shown["cores_busy"], "timeline": timeline}


def main() -> None:
    chosen = sys.argv[1:] or ["commoncrawl", "fineweb", "dclm", "decontaminate"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    planned = runs()
    results: dict[str, list[dict]] = {name: [] for name in chosen}
    for _ in range(ROUNDS):
        for name in chosen:
            results[name].append(measure(name, planned[name][0], env))
    peaks = {name: peak_memory(name, planned[name][0], env) for name in chosen}
    for name in chosen:
        source = planned[name][1]
        size = sum(p.stat().st_size for p in source.iterdir() if p.is_file()) / 1e6
        print(f"\n{name}: {size:,.0f} MB of input in {source.name}; peak {peaks[name]:,.0f} MiB (the process "
              "tree's PSS, in a run of its own)")
        for result in results[name]:
            cpu = sum(result["stages"].values())
            busiest = sorted(result["stages"].items(), key=lambda item: -item[1])[:4]
            print(f"  wall {result['wall']:.1f} s; stages {cpu:,.1f} CPU-s; cores busy "
                  f"{cpu / result['wall']:.2f} of 2 (status: {result['status']:.2f}); "
                  + ", ".join(f"{stage} {seconds:,.1f}" for stage, seconds in busiest))
            marks = result["timeline"]
            if marks:
                print(f"    first result at {marks.get('first_result', 0):.1f} s (Ray ready at {marks.get('ray_ready', 0):.1f}), "
                      f"last at {marks.get('last_result', 0):.1f} s, manifest at {marks.get('manifest', 0):.1f} s; "
                      f"exit at {result['wall']:.1f} s")


if __name__ == "__main__":
    main()

"""FineWeb's recipe, side by side in one run on the same WARCs and the same cores:

1. ``curator-array run --pipeline fineweb`` (Ray; start and stop included);
2. datatrove 0.10.1's FineWeb steps (``examples/fineweb.py``'s order and settings) on its
   ``LocalPipelineExecutor``, one task per WARC, 2 workers, the same fastText model file;
3. a bare ``multiprocessing.Pool(2)`` that reads each WARC with FastWARC and calls trafilatura
   with FineWeb's settings on every page: the limit, since extraction is most of the work;
4. the same loop with mimalloc preloaded, the allocator our extraction children run on.

The pages are real (Debian's documentation, ``support.real_page_warcs``), each
WARC holding every page once under its own URLs, at three sizes: one WARC (start-up dominated),
eight and 32 (throughput dominated). The engines take turns for 3 rounds; prints median wall
times, pages/s, the largest peak RSS and the ratios; asserts nothing. datatrove runs in the
reference environment, never in .venv.

    .venv/bin/python bench/bench_fineweb.py [--sizes 1,8]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import (  # noqa: E402
    CACHE,
    REPO,
    ROUNDS,
    datatrove_fineweb_env,
    ensure_datatrove,
    in_turns,
    real_page_warcs,
)

sys.path.insert(0, str(REPO))
from curator_array.helpers.allocator import bundled_mimalloc  # noqa: E402

WORK = CACHE / "fineweb"
CPUS = 2

DATATROVE = r"""
import sys, time
sys.path.insert(0, sys.argv[4])
from tests.support.reference_fineweb import steps
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter
pipeline = [WarcReader(sys.argv[1], glob_pattern="*.warc.gz"), *(step for _, step in steps()),
            JsonlWriter(sys.argv[2] + "/out")]
tasks = int(sys.argv[5])
LocalPipelineExecutor(pipeline, tasks=tasks, workers=min(tasks, 2), logging_dir=sys.argv[2] + "/logs").run()
"""

BARE = r"""
import glob, sys
from multiprocessing import Pool
from fastwarc.warc import ArchiveIterator, WarcRecordType
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
import trafilatura

def one(path):
    kept = 0
    for record in ArchiveIterator(open(path, "rb"), record_types=WarcRecordType.response, parse_http=True):
        data = record.reader.read()
        html = bytes_to_str(data, record.http_charset or detect_encoding(data))
        text = trafilatura.extract(html, favor_precision=True, include_comments=False, deduplicate=True)
        kept += bool(text)
    return kept

with Pool(2) as pool:
    print(sum(pool.map(one, sorted(glob.glob(sys.argv[1] + "/*.warc.gz")))))
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and the peak RSS (MiB) of the largest process of the command's tree."""
    with tempfile.TemporaryFile() as log:  # a pipe would fill with datatrove's logging and block it
        began = time.perf_counter()
        process = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - began
        if os.waitstatus_to_exitcode(status):
            log.seek(0)
            raise RuntimeError(f"{command[:4]} failed: {log.read().decode(errors='replace')[-3000:]}")
    return wall, usage.ru_maxrss / 1024


def fresh(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)  # every round starts from nothing
    return directory


def ours(directory: Path, out: Path) -> tuple[float, float]:
    return timed([sys.executable, "-m", "curator_array.cli", "run", "--pipeline", "fineweb", "--input-dir",
                  str(directory), "--input-file-type", "warc", "--output-dir", str(out), "--num-cpus", str(CPUS),
                  "--no-progress"], dict(os.environ, PYTHONPATH=str(REPO)))


def datatrove(directory: Path, out: Path, files: int) -> tuple[float, float]:
    env = datatrove_fineweb_env(WORK)
    return timed([sys.executable, "-c", DATATROVE, str(directory), str(out), "", str(REPO), str(files)], env)


def bare(directory: Path, **env: str) -> tuple[float, float]:
    return timed([sys.executable, "-c", BARE, str(directory)], dict(os.environ, **env))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,8,32", help="WARC files per size, comma-separated")
    args = parser.parse_args()
    ensure_datatrove()
    print(f"FineWeb's recipe on {CPUS} cores: wall time (start-up included), pages/s, peak RSS of one process")
    for files in map(int, args.sizes.split(",")):
        directory, pages = real_page_warcs(files)
        runs = WORK / f"runs-{files}"
        shutil.rmtree(runs, ignore_errors=True)
        runs.mkdir(parents=True)
        engines = {"curator-array --pipeline fineweb": lambda: ours(directory, fresh(runs / "ours")),
                   "datatrove LocalPipelineExecutor(2)": lambda: datatrove(directory, fresh(runs / "datatrove"), files),
                   "bare Pool(2): FastWARC + trafilatura": lambda: bare(directory),
                   "the bare loop on mimalloc": lambda: bare(directory, LD_PRELOAD=bundled_mimalloc())}
        turns = in_turns(engines)
        print(f"\n{files} WARC(s), {pages:,} pages, medians of {ROUNDS} rounds in turn", flush=True)
        for label, turn in turns.items():
            print(f"  {label:<40}{turn.median:>7.1f} s{pages / turn.median:>8.1f} pages/s   "
                  f"peak RSS {turn.peak:>5.0f} MiB   ({turn} s)")
        mine, theirs, limit, limit_on_mimalloc = (turn.median for turn in turns.values())
        print(f"  ours vs datatrove: {theirs / mine:.2f}x faster; ours vs the bare loop: {limit / mine:.2f}x its speed "
              f"({limit_on_mimalloc / mine:.2f}x on mimalloc)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

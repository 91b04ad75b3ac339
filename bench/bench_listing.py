"""One listing per run: what an array element pays to find its tasks, walking the input
tree against reading the run's frozen listing, for 100,000 and 1,000,000 files.

For each, in a fresh process per measurement:
- walk: list the whole tree (what every element did before), then select its shard;
- frozen: load the frozen listing from the checkpoint, select its shard, stat its own files.

Filesystem calls are counted with ``strace -f -y``: every syscall that names a path or a
directory under the input tree or the checkpoint (getdents64, openat, stat family). The
trees are 1,000 directories of empty files under .cache/bench (created once). Prints
figures and ratios; asserts nothing. Needs strace (apt-get install strace).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO  # noqa: E402

SHARDS = 10_000
CALLS = "getdents64,openat,open,stat,lstat,newfstatat,statx,access"

WALK = r"""
import sys, time
from curator_array.core.sharding import ShardConfig
from curator_array.stages.partition import FilePartitioningStage
began = time.perf_counter()
tasks = FilePartitioningStage(sys.argv[1], "jsonl").list_tasks()
mine = ShardConfig(7, int(sys.argv[3])).select([t.task_id for t in tasks])
print(f"@@ {time.perf_counter() - began:.3f} {len(mine)}")
"""

FROZEN = r"""
import sys, time
from curator_array.pipelines.pipeline import default_pipeline
from curator_array.pipelines.options import PipelineOptions
from curator_array.run.prepare import prepare_shard
from curator_array.core.sharding import ShardConfig
pipeline = default_pipeline(PipelineOptions(sys.argv[1], sys.argv[2] + "/out"))
began = time.perf_counter()
prepared = prepare_shard(pipeline, sys.argv[2], ShardConfig(7, int(sys.argv[3])))
print(f"@@ {time.perf_counter() - began:.3f} {len(prepared.tasks)}")
"""


def make_tree(files: int) -> Path:
    root = CACHE / f"tree-{files}"
    marker = root / ".complete"
    if marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    per_dir = files // 1000
    for directory in range(1000):
        path = root / f"d{directory:04d}"
        path.mkdir(parents=True)
        for index in range(per_dir):
            os.close(os.open(path / f"f{index:05d}.jsonl", os.O_CREAT | os.O_WRONLY, 0o644))
    marker.write_text("")
    return root


def measure(code: str, tree: Path, checkpoint: Path) -> tuple[float, int, int]:
    """(seconds for the work, tasks found, filesystem calls on the tree or checkpoint)."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as trace:
        out = subprocess.run(["strace", "-f", "-y", "-qq", "-e", f"trace={CALLS}", "-o", trace.name,
                              sys.executable, "-c", code, str(tree), str(checkpoint), str(SHARDS)],
                             capture_output=True, text=True, cwd=REPO, check=True,
                             env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
        watched = re.compile(re.escape(str(tree)) + "|" + re.escape(str(checkpoint)))
        calls = sum(1 for line in open(trace.name, errors="replace") if watched.search(line))
    line = next(line for line in out.splitlines() if line.startswith("@@"))
    _, seconds, found = line.split()
    return float(seconds), int(found), calls


def timed(code: str, tree: Path, checkpoint: Path) -> float:
    out = subprocess.run([sys.executable, "-c", code, str(tree), str(checkpoint), str(SHARDS)], capture_output=True,
                         text=True, cwd=REPO, check=True, env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    return float(next(line for line in out.splitlines() if line.startswith("@@")).split()[1])


def main() -> None:
    if not shutil.which("strace"):
        sys.exit("strace is missing: apt-get install -y strace")
    print(f"per array element of a run of {SHARDS:,} shards (2 cores; strace counts calls, timings without strace):")
    for files in (100_000, 1_000_000):
        began = time.perf_counter()
        tree = make_tree(files)
        made = time.perf_counter() - began
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            checkpoint = Path(tmp) / "ckpt"
            froze = timed(FROZEN, tree, checkpoint)  # the first element walks and freezes
            walk_s, walk_found, walk_calls = timed(WALK, tree, checkpoint), *measure(WALK, tree, checkpoint)[1:]
            frozen_s, frozen_found, frozen_calls = timed(FROZEN, tree, checkpoint), *measure(FROZEN, tree, checkpoint)[1:]
            size = sum(p.stat().st_size for p in (checkpoint / ".nemo_curator_metadata" / ".slurm_array_completion")
                       .glob("listing-*.parquet"))
        print(f"{files:>9,} files ({'made' if made > 1 else 'cached'} tree): first element walks and freezes "
              f"{froze:.2f}s; listing file {size / 2**20:.1f} MiB")
        print(f"   walk every time:  {walk_s:6.2f} s  {walk_calls:>9,} filesystem calls  ({walk_found} own tasks)")
        print(f"   frozen listing:   {frozen_s:6.2f} s  {frozen_calls:>9,} filesystem calls  ({frozen_found} own tasks)")
        print(f"   ratio walk / frozen: {walk_s / frozen_s:.1f}x time, {walk_calls / max(frozen_calls, 1):,.0f}x calls; "
              f"a run of {SHARDS:,} elements: {walk_calls * SHARDS:,.0f} against {frozen_calls * SHARDS:,.0f} calls")


if __name__ == "__main__":
    main()

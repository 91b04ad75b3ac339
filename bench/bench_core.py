"""Core benchmarks: sharding throughput, and retry/status on a large checkpoint.

Prints figures and ratios measured side by side in this run; asserts nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from curator_array.core.layout import CheckpointLayout  # noqa: E402
from curator_array.core.sharding import ShardConfig  # noqa: E402


def best_of(runs: int, func) -> float:
    timings = []
    for _ in range(runs):
        began = time.perf_counter()
        func()
        timings.append(time.perf_counter() - began)
    return min(timings)


def bench_sharding(count: int = 1_000_000, rounds: int = 7) -> None:
    """Best of ``rounds``, the three contenders taking turns so machine noise hits all alike."""
    from curator_array.core.sharding import _owned

    ids = [f"fg-{i:012d}-{i * 7919 % 1000003}" for i in range(count)]
    sha256 = hashlib.sha256

    def bare() -> None:
        for task_id in ids:
            sha256(task_id.encode()).digest()

    config = ShardConfig(shard_index=3, total_shards=100)
    contenders = {"bare": bare, "select": lambda: config.select(ids), "serial": lambda: _owned(ids, 100, 3)}
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(rounds):
        for name, func in contenders.items():
            began = time.perf_counter()
            func()
            best[name] = min(best[name], time.perf_counter() - began)
    print(f"sharding {count:,} ids (select one shard of 100), best of {rounds}:")
    print(f"  bare hashlib.sha256 loop:        {count / best['bare']:,.0f} ids/s")
    print(f"  ShardConfig.select:              {count / best['select']:,.0f} ids/s   "
          f"ratio to bare {best['bare'] / best['select']:.2f}  (goal >= 0.8; {os.cpu_count()} CPUs)")
    print(f"  the same on one core:            {count / best['serial']:,.0f} ids/s   "
          f"ratio to bare {best['bare'] / best['serial']:.2f}")


def build_checkpoint(root: Path, total: int, complete: int) -> CheckpointLayout:
    layout = CheckpointLayout(root)
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": total}))
    for shard in range(complete):
        payload = {
            "minimum_shard_index": 0, "shard_index": shard, "status": "completed", "total_shards": total,
            "source_tasks": 3, "rows_in": 300, "rows_out": 250, "output_file_count": 3, "duration_s": 12.5,
        }
        layout.manifest_path(shard).write_text(json.dumps(payload))
    return layout


def bench_retry_status(total: int = 100_000, complete: int = 99_000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        layout = build_checkpoint(Path(tmp) / "ckpt", total, complete)
        cli = [sys.executable, "-m", "curator_array.cli"]
        for name, args, goal in (
            ("retry --format fields", ["retry", "--format", "fields"], 1.0),
            ("status --json", ["status", "--json"], 2.0),
            ("status", ["status"], 2.0),
        ):
            timings = []
            for _ in range(3):
                began = time.perf_counter()
                subprocess.run([*cli, *args, "--checkpoint-path", str(layout.root)], check=True, capture_output=True, cwd=REPO)
                timings.append(time.perf_counter() - began)
            print(f"{name} on {total:,} shards ({complete:,} complete): {min(timings):.2f}s wall, best of 3 (goal < {goal:.0f}s)")


if __name__ == "__main__":
    bench_sharding()
    bench_retry_status()

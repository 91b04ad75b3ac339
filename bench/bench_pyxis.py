"""Per-element overhead under the real pyxis plugin, side by side in one run:

- bare metal: `srun entrypoint` on the throwaway SLURM cluster;
- pyxis, its default: the `.sqsh` unpacked for every step (`enroot create`);
- pyxis with `use_squashfuse=1`: the `.sqsh` mounted, with lz4 (our default) and zstd.

Each element runs the entrypoint on one small JSONL file (so its time is nearly all
overhead: container, imports, Ray start and stop), three times; the median wall time of
`srun` is printed, with the `.sqsh` sizes. Needs root (dockerd, SLURM) and pyxis with enroot
installed (the throwaway cluster loads them where a site installed them; without them this
says what is missing and exits). Asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "container"))
import build_image  # noqa: E402  (container/build_image.py, the Makefile's build tool)

CLUSTER = [sys.executable, str(REPO / "scripts" / "slurm_cluster.py")]
WORK = Path("/var/tmp/curator-array-bench/pyxis")  # not under /tmp: the container's /tmp is its own
ENTRYPOINT = "/opt/curator-array/entrypoints/curator-array-entrypoint"
OPTIONS = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
REPEATS = 3


def element(env: dict, image: Path | None, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    command = ["srun", "-N1", "-n1", "-c1"]
    if image is None:
        command.append(str(REPO / "entrypoints" / "curator-array-entrypoint"))
    else:
        command += [f"--container-image={image}", f"--container-mounts={WORK}:{WORK}", "--container-workdir=/tmp",
                    "--no-container-mount-home", "--container-env=INPUT_DIR,OUTPUT_DIR", ENTRYPOINT]
    began = time.perf_counter()
    subprocess.run([*command, *OPTIONS], env=dict(env, OUTPUT_DIR=str(out)), check=True, capture_output=True)
    return time.perf_counter() - began


def median_of(env: dict, image: Path | None, label: str) -> float:
    times = [element(env, image, WORK / f"out-{label}-{i}") for i in range(REPEATS)]
    return statistics.median(times)


def main() -> None:
    started = subprocess.run([*CLUSTER, "start", "--nodes", "3", "--max-array-size", "5", "--squashfuse",
                              "--pyxis", "required"], capture_output=True, text=True)
    if started.returncode:
        sys.exit(f"bench_pyxis: {started.stderr.strip()}")
    started = started.stdout
    slurm_conf = next(line.split("=", 1)[1] for line in started.splitlines() if "SLURM_CONF=" in line)
    build_image.build_image(build_image.DEFAULT_TAG, None)
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "in").mkdir(parents=True)
    shutil.copy(REPO / "sample_data" / "jsonl" / "part-000.jsonl", WORK / "in")
    images = {}
    for compression in ("lz4", "zstd"):
        os.environ["SQSH_COMPRESSION"] = compression
        images[compression] = build_image.build_sqsh(build_image.DEFAULT_TAG, WORK / f"image-{compression}.sqsh")
    env = dict(os.environ, SLURM_CONF=slurm_conf, INPUT_DIR=str(WORK / "in"), PATH=f"{REPO}/.venv/bin:{os.environ['PATH']}")
    results = {}
    try:
        results["bare metal"] = median_of(env, None, "bare")
        subprocess.run([*CLUSTER, "pyxis-mode", "create"], check=True)
        results["pyxis, enroot create per step (lz4 .sqsh)"] = median_of(env, images["lz4"], "create")
        subprocess.run([*CLUSTER, "pyxis-mode", "squashfuse"], check=True)
        results["pyxis, use_squashfuse=1, lz4 .sqsh"] = median_of(env, images["lz4"], "fuse-lz4")
        results["pyxis, use_squashfuse=1, zstd .sqsh"] = median_of(env, images["zstd"], "fuse-zstd")
    finally:
        subprocess.run([*CLUSTER, "pyxis-mode", "squashfuse"], check=True)
    bare = results["bare metal"]
    print(f"one element, one small file, median of {REPEATS} (srun wall time, 2 cores):")
    for label, seconds in results.items():
        print(f"  {label:<44}{seconds:6.1f} s   ratio to bare metal {seconds / bare:.2f}   "
              f"overhead {seconds - bare:+.1f} s")
    for compression, path in images.items():
        print(f".sqsh size, {compression:<5}{path.stat().st_size / 2**20:8.0f} MiB")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()

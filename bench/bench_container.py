"""Container figures, measured in one run: image and .sqsh sizes, cold and cached build
time, .sqsh conversion time, and one array task's wall time inside the container (ch-run of
the .sqsh) beside bare metal. Needs root (throwaway dockerd) and mmdebstrap/squashfs-tools.
Asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "container"))
import build_image  # noqa: E402  (container/build_image.py, the Makefile's build tool)

SAMPLE = REPO / "sample_data" / "jsonl"
ENTRYPOINT = "/opt/curator-array/entrypoints/curator-array-entrypoint"
TAG = "curator-array:bench"


def timed(func) -> float:
    began = time.perf_counter()
    func()
    return time.perf_counter() - began


def run_task(command: list[str], data: Path, out: Path) -> float:
    env = dict(os.environ, USER=os.environ.get("USER", "root"), INPUT_DIR=str(data), OUTPUT_DIR=str(out),
               SLURM_JOB_ID="5", SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_TASK_COUNT="1")
    args = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
    return timed(lambda: subprocess.run([*command, *args], env=env, check=True, capture_output=True))


def main() -> None:
    tool = build_image
    client = tool.docker_client()
    try:
        client.images.get("curator-array-base:bookworm")
    except Exception:  # noqa: BLE001
        tool.build_base("curator-array-base:bookworm")
    for image in client.images.list(name=TAG):
        client.images.remove(image.id, force=True)
    cold = timed(lambda: subprocess.run([sys.executable, str(REPO / "container" / "build_image.py"), "image", "--tag", TAG,
                                         "--base-image", "curator-array-base:bookworm"], check=True, capture_output=True,
                                        env=dict(os.environ, CURATOR_ARRAY_NO_CACHE="1")))
    cached = timed(lambda: tool.build_image(TAG, "curator-array-base:bookworm"))
    image = client.images.get(TAG)
    with tempfile.TemporaryDirectory(dir=REPO / "build") as tmp:
        sqsh = Path(tmp) / "bench.sqsh"
        convert = timed(lambda: tool.build_sqsh(TAG, sqsh))
        sqsh_size = sqsh.stat().st_size
        with tempfile.TemporaryDirectory() as shared:  # under /tmp, which ch-run shares with the host
            data = Path(shared) / "in"
            shutil.copytree(SAMPLE, data)
            bare = run_task([str(REPO / "entrypoints" / "curator-array-entrypoint")], data, Path(shared) / "bare")
            contained = run_task(["ch-run", "--set-env", str(sqsh), "--", ENTRYPOINT], data, Path(shared) / "contained")
    print(f"image size          {image.attrs['Size'] / 2**20:8.0f} MiB (goal <= 1024)")
    print(f".sqsh size          {sqsh_size / 2**20:8.0f} MiB (zstd level 3)")
    print(f"cold build          {cold:8.1f} s (no layer cache; pip downloads included)")
    print(f"cached build        {cached:8.1f} s")
    print(f".sqsh conversion    {convert:8.1f} s")
    print(f"one array task, 12 sample tasks: bare metal {bare:.1f} s, in the container (ch-run) {contained:.1f} s "
          f"(ratio {contained / bare:.2f})")


if __name__ == "__main__":
    main()

"""The seed's headline problem, measured: a cheap download stage racing ahead of an expensive one.

A loopback server throttles aggregate bandwidth (40 MB/s) and each connection (25 MB/s) and
serves 100 files of 2 MB. Downstream of the download, a stage spends more CPU per byte
than the download costs. Two runs side by side on one private Ray cluster (2 CPUs):
  capped    DownloadStage with num_workers_per_node=2 (+ hard per-node slots)
  uncapped  the same stage with no sizing: Ray Data's default, as in the reference system
Reported: end-to-end time, peak concurrent downloads, peak bytes downloaded but not yet
consumed, and download throughput as a fraction of the server's limit. Asserts nothing.
The node advertises 16 logical CPUs on 2 real cores, so that, as in the reference run, CPU
slots are plentiful compared with bandwidth.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from curator_array.clients import RayClient  # noqa: E402
from curator_array.pipeline import Pipeline  # noqa: E402
from curator_array.ray_cluster import NodeOptions  # noqa: E402
from curator_array.stages.base import ProcessingStage, Resources  # noqa: E402
from curator_array.stages.download import DOWNLOAD_SLOT, DownloadStage  # noqa: E402
from curator_array.stages.urls import UrlListStage  # noqa: E402
from tests.http_faults import FaultServer, random_bytes  # noqa: E402
from tests.integration.runs import run_shard  # noqa: E402

MB = 1_000_000
LIMIT = 40 * MB
FILES = {f"f{i:03d}.bin": random_bytes(2 * MB, i) for i in range(100)}


class Consume(ProcessingStage):
    """Expensive per byte: hashes the file repeatedly, then marks it consumed."""

    name = "consume"
    resources = Resources(cpus=7.0)

    def process(self, task):
        for path in task.files:
            data = Path(path).read_bytes()
            for _ in range(12):
                data = hashlib.sha256(data).digest() + data[32:]
            Path(path + ".consumed").write_text("1")
        return task


class UncappedDownload(DownloadStage):
    name = "download"

    def __init__(self, download_dir):
        super().__init__(download_dir)
        self.ray_stage_spec = {}


def backlog_sampler(directory: Path, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set():
        waiting = 0
        if directory.exists():
            for entry in os.scandir(directory):
                name = entry.name
                if name.endswith(".bin") and not os.path.exists(entry.path + ".consumed"):
                    try:
                        waiting += entry.stat().st_size
                    except FileNotFoundError:
                        pass
        peak[0] = max(peak[0], waiting)
        time.sleep(0.05)


def measure(label: str, stage_factory, work: Path) -> dict:
    server = FaultServer(FILES, aggregate_rate=LIMIT, per_connection_rate=25 * MB, chunk=256 * 1024).start()
    try:
        lists = work / f"{label}.txt"
        lists.write_text("".join(server.url("ok", name) + "\n" for name in FILES))
        download_dir = work / f"dl-{label}"
        pipeline = Pipeline(UrlListStage([lists]), [stage_factory(download_dir), Consume()])
        stop, peak = threading.Event(), [0]
        sampler = threading.Thread(target=backlog_sampler, args=(download_dir, stop, peak), daemon=True)
        sampler.start()
        began = time.perf_counter()
        outcome = run_shard(pipeline, None, work / f"ckpt-{label}")
        elapsed = time.perf_counter() - began
        stop.set()
        sampler.join()
        times = [r["time"] for reqs in server.requests.values() for r in reqs]
        download_span = max(times) - min(times) if times else elapsed
        return {
            "label": label, "status": outcome.status, "seconds": elapsed, "peak_downloads": server.peak_active,
            "peak_backlog_mb": peak[0] / MB, "throughput_fraction": server.bytes_sent / max(download_span, 1e-9) / LIMIT,
            "busy_fraction": server.bytes_sent / max(server.busy_s, 1e-9) / LIMIT,
        }
    finally:
        server.stop()


def main() -> None:
    # Plenty of logical CPUs relative to bandwidth, as in the reference run (900 CPUs): the
    # consumer takes 7 per task (2 at once, one per real core, room left for downloads), downloads take 0.25.
    options = NodeOptions(num_cpus=16, object_store_memory=300 * 2**20, custom_resources={DOWNLOAD_SLOT: 2})
    with tempfile.TemporaryDirectory() as tmp, RayClient(node_options=options):
        work = Path(tmp)
        capped = measure("capped", lambda d: DownloadStage(d, workers_per_node=2), work)
        uncapped = measure("uncapped", UncappedDownload, work)
    print(f"100 files x 2 MB; server limit {LIMIT / MB:.0f} MB/s aggregate, 25 MB/s per connection; "
          "16 logical CPUs on 2 cores")
    print(f"{'':10}{'end-to-end':>12}{'peak downloads':>16}{'peak backlog':>14}{'throughput/limit':>18}"
          f"{'while downloading':>19}")
    for row in (capped, uncapped):
        print(f"{row['label']:<10}{row['seconds']:>11.1f}s{row['peak_downloads']:>16}{row['peak_backlog_mb']:>12.0f}MB"
              f"{row['throughput_fraction']:>18.2f}{row['busy_fraction']:>19.2f}")
    print(f"capped / uncapped end-to-end time = {capped['seconds'] / uncapped['seconds']:.2f}x (goal <= 1.0). "
          "throughput/limit spans first to last request, so it includes waiting for the slower consumer; "
          "'while downloading' counts only time with a body in flight")


if __name__ == "__main__":
    main()

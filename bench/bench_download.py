"""The seed's headline problem, measured: a cheap download stage racing ahead of an expensive one.

A loopback server throttles aggregate bandwidth (40 MB/s) and each connection (25 MB/s) and
serves 100 files of 2 MB. Two scenes, each run capped and uncapped side by side on one
private Ray cluster:
  consumer-bound  downstream of the download, a stage spends more CPU per byte than the
                  download costs (the seed's case): end-to-end time and backlog matter
  download-bound  the downstream stage is cheap: the link is the bottleneck, so download
                  throughput shows whether 2 workers per node are enough to fill it
capped = DownloadStage with num_workers_per_node=2 (+ hard per-node slots); uncapped = the
same stage with no sizing, Ray Data's default, as in the reference system.
Reported: end-to-end time, peak concurrent downloads, peak bytes downloaded but not yet
consumed, and download throughput as a fraction of the server's limit. Asserts nothing.
The node advertises 16 logical CPUs on 2 real cores, so that, as in the reference run, CPU
slots are plentiful compared with bandwidth.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from curator_array.execution.clients import RayClient  # noqa: E402
from curator_array.execution.ray_cluster import NodeOptions  # noqa: E402
from curator_array.pipelines.pipeline import Pipeline  # noqa: E402
from curator_array.run.shard import run_shard_here  # noqa: E402
from curator_array.stages.base import ProcessingStage, Resources  # noqa: E402
from curator_array.stages.download import DOWNLOAD_SLOT, DownloadStage  # noqa: E402
from curator_array.stages.io import FileListWriter  # noqa: E402
from curator_array.stages.urls import UrlListStage  # noqa: E402
from tests.support.fault_server import FaultServer, random_bytes  # noqa: E402

MB = 1_000_000
LIMIT = 40 * MB
# BENCH_DOWNLOAD_FILES=COUNTxMB changes the file set (default 100x2), e.g. to see per-task overhead.
COUNT, SIZE_MB = (int(v) for v in os.environ.get("BENCH_DOWNLOAD_FILES", "100x2").split("x"))
FILES = {f"f{i:03d}.bin": random_bytes(SIZE_MB * MB, i) for i in range(COUNT)}


class Consume(ProcessingStage):
    """Expensive per byte: hashes the file repeatedly, then marks it consumed."""

    name = "consume"
    resources = Resources(cpus=7.0)
    rounds = 12

    def process(self, task):
        for path in task.files:
            data = Path(path).read_bytes()
            for _ in range(self.rounds):
                data = hashlib.sha256(data).digest() + data[32:]
            Path(path + ".consumed").write_text("1")
        return task


class LightConsume(Consume):
    """Cheap per byte and per file: reads the file once, in two actors with inputs queued.

    As one-CPU Ray tasks, the reads would cost more in scheduling (about 0.2 s per task on
    2 cores) than in reading, and the consumer, not the link, would set the pace.
    """

    resources = Resources(cpus=1.0)
    rounds = 0
    ray_stage_spec = {"is_actor_stage": True, "num_workers": 2, "max_tasks_in_flight_per_actor": 3}


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


class ServerProcess:
    """The throttled server in a process of its own, forked before Ray starts.

    A real server is remote; run inside the driver, it would compete for the GIL with Ray
    Data's scheduling loop and the backlog sampler, and slow every download down.
    """

    def __init__(self, files: dict[str, bytes]):
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(files, child), daemon=True)
        self.process.start()
        self.base_url = self.conn.recv()

    def call(self, command: str):
        self.conn.send(command)
        return self.conn.recv()

    def url(self, name: str) -> str:
        return f"{self.base_url}/ok/{name}"

    def stop(self) -> None:
        self.call("stop")
        self.process.join(10)


def _serve(files: dict[str, bytes], conn) -> None:
    server = FaultServer(files, aggregate_rate=LIMIT, per_connection_rate=25 * MB, chunk=256 * 1024).start()
    conn.send(server.base_url)
    while True:
        command = conn.recv()
        if command == "reset":
            with server.lock:
                server.requests.clear()
                server.peak_active = server.bytes_sent = 0
                server.busy_s = 0.0
            conn.send(None)
        elif command == "stats":
            with server.lock:
                starts = [r["time"] for reqs in server.requests.values() for r in reqs]
                ends = [r["body_end"] for reqs in server.requests.values() for r in reqs if "body_end" in r]
                conn.send({"first_request": min(starts, default=None), "last_body_end": max(ends, default=0.0),
                           "peak_active": server.peak_active, "bytes_sent": server.bytes_sent, "busy_s": server.busy_s})
        else:
            server.stop()
            conn.send(None)
            return


def measure(label: str, stage_factory, consumer, work: Path, server: ServerProcess, files=FILES) -> dict:
    server.call("reset")
    lists = work / f"{label}.txt"
    lists.write_text("".join(server.url(name) + "\n" for name in files))
    download_dir = work / f"dl-{label}"
    pipeline = Pipeline(UrlListStage([lists]), [stage_factory(download_dir), consumer(), FileListWriter(work / f"out-{label}")])
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=backlog_sampler, args=(download_dir, stop, peak), daemon=True)
    sampler.start()
    began = time.perf_counter()
    outcome = run_shard_here(pipeline, work / f"ckpt-{label}")
    elapsed = time.perf_counter() - began
    stop.set()
    sampler.join()
    stats = server.call("stats")
    span = stats["last_body_end"] - stats["first_request"] if stats["first_request"] else elapsed
    return {
        "label": label, "status": outcome.status, "seconds": elapsed, "peak_downloads": stats["peak_active"],
        "peak_backlog_mb": peak[0] / MB, "throughput_fraction": stats["bytes_sent"] / max(span, 1e-9) / LIMIT,
        "busy_fraction": stats["bytes_sent"] / max(stats["busy_s"], 1e-9) / LIMIT,
    }


def print_scene(title: str, capped: dict, uncapped: dict) -> None:
    print(f"\n{title}")
    print(f"{'':10}{'end-to-end':>12}{'peak downloads':>16}{'peak backlog':>14}{'throughput/limit':>18}"
          f"{'while downloading':>19}")
    for row in (capped, uncapped):
        print(f"{row['label'].split('-', 1)[1]:<10}{row['seconds']:>11.1f}s{row['peak_downloads']:>16}{row['peak_backlog_mb']:>12.0f}MB"
              f"{row['throughput_fraction']:>18.2f}{row['busy_fraction']:>19.2f}")
    print(f"capped / uncapped end-to-end time = {capped['seconds'] / uncapped['seconds']:.2f}x")


def main() -> None:
    # Plenty of logical CPUs relative to bandwidth, as in the reference run (900 CPUs): the
    # consumer takes 7 per task (2 at once, one per real core, room left for downloads), downloads take 0.25.
    options = NodeOptions(num_cpus=16, object_store_memory=300 * 2**20, custom_resources={DOWNLOAD_SLOT: 2})
    server = ServerProcess(FILES)
    try:
        with tempfile.TemporaryDirectory() as tmp, RayClient(node_options=options):
            work = Path(tmp)
            # Start the worker processes and actors' imports once, so the first row measured
            # does not carry the cluster's cold start.
            warm_files = dict(list(FILES.items())[:4])
            for index, factory in enumerate((lambda d: DownloadStage(d, workers_per_node=2), UncappedDownload)):
                measure(f"warmup-{index}", factory, LightConsume, work, server, warm_files)
            rows = {}
            for scene, consumer in (("consumer", Consume), ("download", LightConsume)):
                rows[scene] = (
                    measure(f"{scene}-capped", lambda d: DownloadStage(d, workers_per_node=2), consumer, work, server),
                    measure(f"{scene}-uncapped", UncappedDownload, consumer, work, server),
                )
    finally:
        server.stop()
    print(f"{COUNT} files x {SIZE_MB} MB; server limit {LIMIT / MB:.0f} MB/s aggregate, 25 MB/s per connection; "
          "16 logical CPUs on 2 cores")
    print_scene("consumer-bound (hash 12x per file; goals: end-to-end ratio <= 1.0, peak downloads = cap, "
                "backlog bounded)", *rows["consumer"])
    print_scene("download-bound (read once per file; goal: capped throughput/limit >= 0.8)", *rows["download"])
    print("throughput/limit spans the first request to the last byte; 'while downloading' counts only time with a body "
          "in flight. In the consumer-bound scene the capped stage pauses on purpose when the consumer "
          "falls behind, so only the download-bound scene measures how well the cap fills the link.")


if __name__ == "__main__":
    main()

"""A Common Crawl snapshot as input, on real Ray, from a local server laid out like the archive.

The server (``tests/support/fault_server.py``, ``/mirror/``) serves ``crawl-data/CC-TEST/``
with a ``warc.paths.gz`` and six WARC files made here; one file answers 503 "Slow Down"
with Retry-After first, one drops the connection mid-body, one refuses Range and drops.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_array.pipelines.options import PipelineOptions
from curator_array.run.phases import PHASES
from curator_array.run.request import RunRequest
from curator_array.run.shard import run_shard_here
from curator_array.stages.politeness import NodePoliteness, state_file
from tests.support.fault_server import FaultServer
from tests.support.warcs import write_warc
from tests.web_pages import pages

pytestmark = pytest.mark.ray
CRAWL = "CC-TEST-2024-01"
WINDOW = 1.0  # seconds
RATE = 4.0


def texts(out: Path) -> dict[str, str]:
    rows = [r for path in sorted(out.glob("*.parquet")) for r in pq.read_table(path).to_pylist()]
    return {row["url"]: row["text"] for row in rows}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    directory = tmp_path_factory.mktemp("warcs")
    names = []
    for index in range(6):
        records, _ = pages(f"site{index}.example")
        name = f"crawl-data/{CRAWL}/segments/17000{index}/warc/CC-{index:05d}.warc.gz"
        write_warc(directory / Path(name).name, records)
        names.append(name)
    files = {name: (directory / Path(name).name).read_bytes() for name in names}
    files[f"crawl-data/{CRAWL}/warc.paths.gz"] = gzip.compress(("\n".join(names) + "\n").encode())
    modes = {names[1]: "slowdown", names[3]: "drop", names[4]: "norange"}
    return directory, names, files, modes


def test_a_crawl_by_name_equals_its_warcs_read_from_disk(two_node_cluster, archive, tmp_path):
    directory, names, files, modes = archive
    server = FaultServer(files, modes=modes).start()
    try:
        options = PipelineOptions("", str(tmp_path / "out"), crawl=(CRAWL,), crawl_base_url=server.url("mirror", ""),
                                  max_requests_per_second=RATE, download_dir=str(tmp_path / "downloads"))
        request = RunRequest(options, checkpoint_path=str(tmp_path / "ckpt"), pipeline_ref="commoncrawl")
        outcome = run_shard_here(request.with_crawls().build_pipeline(PHASES), tmp_path / "ckpt",
                                 output_dir=tmp_path / "out")
        assert outcome.status == "completed"
        gets = {name: server.gets("mirror", name) for name in names}
        again = run_shard_here(RunRequest(options, checkpoint_path=str(tmp_path / "ckpt2"),
                                          pipeline_ref="commoncrawl").with_crawls().build_pipeline(PHASES),
                               tmp_path / "ckpt2", output_dir=tmp_path / "out2")
        assert again.status == "completed"
        assert {name: server.gets("mirror", name) for name in names} == gets, "nothing downloaded twice"
    finally:
        server.stop()

    from_disk = PipelineOptions(str(directory), str(tmp_path / "disk"), input_file_type="warc")
    run_shard_here(RunRequest(from_disk, pipeline_ref="commoncrawl").build_pipeline(PHASES), tmp_path / "ckpt3",
                   output_dir=tmp_path / "disk")
    assert texts(tmp_path / "out") == texts(tmp_path / "disk") and texts(tmp_path / "out")
    assert (tmp_path / "ckpt" / ".nemo_curator_metadata" / ".slurm_array_completion" /
            f"crawl-{CRAWL}.warc.paths.gz").is_file(), "the paths list is saved with the run"

    assert server.peak_active <= 4, "two nodes, two download slots each"
    starts = sorted(r["time"] for name in names for r in gets[name])
    # The node's turns are 1/RATE apart; arrivals at the server may bunch by the jitter of a
    # loaded machine, so the rate is checked over windows, not between two requests.
    busiest = max(sum(start <= later < start + WINDOW for later in starts) for start in starts)
    assert len(starts) > RATE * WINDOW + 1 and busiest <= RATE * WINDOW + 1, \
        f"the node's request rate stayed under {RATE}/s ({busiest} requests in {WINDOW} s at the busiest)"
    [throttled, after] = gets[names[1]]
    # The node's back-off ends at ``resume_at``; it began when a worker read the 503, which on a
    # loaded host can be well after the server sent it, so the held window is taken from the
    # node's own record. A request whose turn came just before may still be on its way.
    resume_at = NodePoliteness(state_file(tmp_path / "downloads")).resumes_at()
    held = [t for t in starts if resume_at - 1.0 + 0.3 < t < resume_at - 0.05]
    assert throttled["time"] < resume_at - 1.0 and not held, \
        "after a 503 Slow Down, the node's other downloads waited too"
    assert after["time"] - throttled["time"] >= 0.95, "Retry-After: 1 was honoured"
    assert len(gets[names[3]]) == len(gets[names[4]]) == 2, "a dropped download was tried again, once"


def test_a_slice_of_the_crawl(two_node_cluster, archive, tmp_path):
    _, names, files, _ = archive
    server = FaultServer(files).start()
    try:
        options = PipelineOptions("", str(tmp_path / "out"), crawl=(CRAWL,), crawl_base_url=server.url("mirror", ""),
                                  crawl_files="2:4")
        request = RunRequest(options, checkpoint_path=str(tmp_path / "ckpt"), pipeline_ref="commoncrawl")
        assert run_shard_here(request.with_crawls().build_pipeline(PHASES), tmp_path / "ckpt",
                              output_dir=tmp_path / "out").status == \
            "completed"
        fetched = [name for name in names if server.gets("mirror", name)]
    finally:
        server.stop()
    assert fetched == names[2:4]
    assert {url.split("/")[2] for url in texts(tmp_path / "out")} == {"site2.example", "site3.example"}

"""Common Crawl input without Ray: paths files, slices, the saved list, a node's shared pacing."""

from __future__ import annotations

import fcntl
import gzip
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from curator_array.core.errors import CheckpointMismatchError, ConfigError, InputError
from curator_array.core.layout import CheckpointLayout
from curator_array.run.crawls import crawl_paths_files, paths_url
from curator_array.stages.politeness import NodePoliteness
from curator_array.stages.urls import PathsSlice, UrlListStage, read_url_lists

PATHS = [f"crawl-data/CC-TEST/segments/{n}/warc/file-{n}.warc.gz" for n in range(5)]


def write_paths(path, paths=PATHS, compress=True):
    text = "\n".join(paths) + "\n"
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    return path


@pytest.mark.parametrize("name,compress", [("warc.paths.gz", True), ("warc.paths", False)])
def test_a_paths_file_is_a_url_list_relative_to_the_base(tmp_path, name, compress):
    paths = write_paths(tmp_path / name, compress=compress)
    entries = read_url_lists([paths], "https://mirror.example/cc")
    assert [url for url, _, _ in entries] == [f"https://mirror.example/cc/{p}" for p in PATHS]
    assert entries[2][2] == f"{paths}:3", "errors name the file and line"
    sliced = read_url_lists([paths], "https://mirror.example/", PathsSlice.parse("1:3"))
    assert [url for url, _, _ in sliced] == [f"https://mirror.example/{p}" for p in PATHS[1:3]]
    tasks = UrlListStage([paths], paths_slice=":2").list_tasks()
    assert sorted(u for t in tasks for u in t.urls) == [f"https://data.commoncrawl.org/{p}" for p in PATHS[:2]]


@pytest.mark.parametrize("text", ["12", "a:b", "-1:3", "1:2:3"])
def test_a_bad_slice_is_refused_naming_the_form(text):
    with pytest.raises(ConfigError, match="crawl files"):
        PathsSlice.parse(text)


def test_a_corrupt_paths_file_is_an_input_error(tmp_path):
    (tmp_path / "warc.paths.gz").write_bytes(b"not gzip")
    with pytest.raises(InputError, match="cannot read paths file"):
        read_url_lists([tmp_path / "warc.paths.gz"])


def mirror(root, crawl, paths=PATHS):
    directory = root / "crawl-data" / crawl
    directory.mkdir(parents=True, exist_ok=True)
    write_paths(directory / "warc.paths.gz", paths)
    return f"file://{root}/"


def test_the_paths_list_is_saved_once_and_a_changed_one_is_refused(tmp_path):
    base, layout = mirror(tmp_path / "mirror", "CC-TEST"), CheckpointLayout(tmp_path / "ckpt")
    assert paths_url("https://h/", "CC-X") == "https://h/crawl-data/CC-X/warc.paths.gz"
    [saved] = crawl_paths_files(("CC-TEST",), base, layout)
    assert saved == layout.crawl_paths_path("CC-TEST") and gzip.decompress(saved.read_bytes()).decode().split() == PATHS
    mirror(tmp_path / "mirror", "CC-TEST", PATHS + ["crawl-data/CC-TEST/segments/9/warc/late.warc.gz"])
    assert crawl_paths_files(("CC-TEST",), base, layout) == [saved], "elements read the saved list"
    assert len(gzip.decompress(saved.read_bytes()).split()) == 5
    with pytest.raises(CheckpointMismatchError, match="paths list of crawl CC-TEST changed .*5 → 6 files"):
        crawl_paths_files(("CC-TEST",), base, layout, refresh=True)
    [scratch] = crawl_paths_files(("CC-OTHER",), mirror(tmp_path / "mirror", "CC-OTHER"), layout, save=False)
    assert not layout.crawl_paths_path("CC-OTHER").exists() and scratch.is_file(), "a dry run writes nothing"
    with pytest.raises(InputError, match="cannot fetch the crawl's paths list"):
        crawl_paths_files(("CC-MISSING",), base, layout, retries=0)
    with pytest.raises(ConfigError, match="named like CC-MAIN"):
        crawl_paths_files(("../etc",), base, layout)


def _take_turns(path, rate, count, queue):
    pacing = NodePoliteness(path, rate)
    for _ in range(count):
        turn = pacing.take_turn()
        queue.put((turn, time.time()))


def test_the_request_rate_cap_holds_across_worker_processes(tmp_path):
    queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_take_turns, args=(tmp_path / "state", 20.0, 6, queue))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    turns = sorted(queue.get(timeout=5) for _ in range(18))
    # The node's turns are 0.05 s apart whatever the host's load: a worker that wakes late
    # goes late, never early. A cap per process, or an unlocked one, hands two workers
    # turns closer than that (the same turn, at start).
    gaps = [later - earlier for (earlier, _), (later, _) in zip(turns, turns[1:])]
    assert min(gaps) >= 0.05 - 1e-6, f"20 requests/s means turns 0.05 s apart; closest {min(gaps):.3f} s"
    late = [went - turn for turn, went in turns]
    assert min(late) >= 0, f"a request went {-min(late):.3f} s before its turn"


def test_a_turn_waits_while_another_worker_holds_the_node_state(tmp_path):
    pacing = NodePoliteness(tmp_path / "state", 20.0)
    pacing.take_turn()
    taken = threading.Event()
    with open(tmp_path / "state", "rb+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        threading.Thread(target=lambda: (pacing.take_turn(), taken.set()), daemon=True).start()
        assert not taken.wait(0.3), "a turn was handed out while another worker held the state's lock"
    assert taken.wait(10), "the turn follows once the lock is free"


def test_a_throttled_worker_holds_back_every_worker_of_the_node(tmp_path):
    first, second = NodePoliteness(tmp_path / "state"), NodePoliteness(tmp_path / "state")
    before = time.time()
    assert before <= second.take_turn() <= time.time(), "no limit, no back-off: the turn is now"
    assert second.resumes_at() == 0.0
    first.slow_down(0.5)
    assert time.time() + 0.4 < second.resumes_at() <= time.time() + 0.5, "every worker sees the back-off"
    began = time.monotonic()
    second.take_turn()
    assert time.monotonic() - began >= 0.45


def test_a_dry_runs_fetched_list_is_gone_when_its_process_exits(tmp_path):
    base = mirror(tmp_path / "mirror", "CC-TEST")
    code = ("import sys\nfrom curator_array.core.layout import CheckpointLayout\n"
            "from curator_array.run.crawls import crawl_paths_files\n"
            "[scratch] = crawl_paths_files(('CC-TEST',), sys.argv[1], CheckpointLayout(sys.argv[2]), save=False)\n"
            "assert scratch.is_file()\nprint(scratch)\n")
    done = subprocess.run([sys.executable, "-c", code, base, str(tmp_path / "ckpt")], capture_output=True, text=True,
                          check=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    scratch = Path(done.stdout.strip())
    assert scratch.parent.parent == tmp_path and not scratch.parent.exists()


def test_submit_saves_the_crawl_list_and_refuses_a_changed_one(tmp_path, capsys, monkeypatch):
    from curator_array.cli import main
    from tests.conftest import REPO

    base, out = mirror(tmp_path / "mirror", "CC-TEST"), tmp_path / "out"
    monkeypatch.setenv("OUTPUT_DIR", str(out))
    submit = ["submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"), "--max-array-size", "none",
              "--total-shards", "2"]
    crawl = ["--", "--pipeline", "commoncrawl", "--crawl", "CC-TEST", "--crawl-base-url", base]
    assert main([*submit, "--dry-run", *crawl]) == 0
    assert not CheckpointLayout(out).crawl_paths_path("CC-TEST").exists(), "a dry run saves nothing"
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 4242\n")
    (tmp_path / "bin" / "sbatch").chmod(0o755)
    assert main([*submit, *crawl]) == 0
    assert CheckpointLayout(out).crawl_paths_path("CC-TEST").is_file()
    mirror(tmp_path / "mirror", "CC-TEST", PATHS[:3])
    capsys.readouterr()
    assert main([*submit, "--dry-run", *crawl]) == 2
    assert "paths list of crawl CC-TEST changed since the run saved it (5 → 3 files" in capsys.readouterr().err


def test_building_the_pipeline_uses_no_network_the_crawl_lists_are_resolved_once_before(tmp_path):
    """A crawl's paths list is fetched (or read from the run) by ``with_crawls``, once; building the
    pipeline afterwards reads nothing from the network, and refuses a request not resolved first."""
    import socket

    from curator_array.pipelines.options import PipelineOptions
    from curator_array.run.phases import PHASES
    from curator_array.run.request import RunRequest

    with socket.socket() as probe:  # a port nothing listens on: any fetch from it fails
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/"
    layout = CheckpointLayout(tmp_path / "ckpt")
    layout.completion_dir.mkdir(parents=True)
    layout.crawl_paths_path("CC-TEST-1").write_bytes(gzip.compress(b"crawl-data/CC-TEST-1/a.warc.gz\n"))
    options = PipelineOptions("", str(tmp_path / "out"), crawl=("CC-TEST-1",), crawl_base_url=dead,
                              download_retries=0)
    request = RunRequest(options, checkpoint_path=str(layout.root), pipeline_ref="commoncrawl")
    with pytest.raises(RuntimeError, match="resolved before the pipeline is built"):
        request.build_pipeline(PHASES)
    resolved = request.with_crawls()
    assert resolved.options.crawl_lists == (str(layout.crawl_paths_path("CC-TEST-1")),)
    assert resolved.build_pipeline(PHASES).stages, "built from the saved list, the dead base never asked"

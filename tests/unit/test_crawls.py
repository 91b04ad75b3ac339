"""Common Crawl input without Ray: paths files, slices, the saved list, a node's shared pacing."""

from __future__ import annotations

import gzip
import multiprocessing
import time

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
        pacing.take_turn()
        queue.put(time.time())


def test_the_request_rate_cap_holds_across_worker_processes(tmp_path):
    queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_take_turns, args=(tmp_path / "state", 20.0, 6, queue))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    times = sorted(queue.get(timeout=5) for _ in range(18))
    # Each request waits for its slot, 0.05 s after the previous one. A process that wakes
    # late (a loaded host: 50 ms seen in CI) shortens the gap to the next request, and any
    # span starting at its own, by its lateness; caps per process would put three
    # requests at once (median gap near 0, 5 requests within about 0.07 s, 18 within 0.3).
    gaps = sorted(later - earlier for earlier, later in zip(times, times[1:]))
    assert gaps[len(gaps) // 2] > 0.04, f"20 requests/s means 0.05 s apart; median gap {gaps[len(gaps) // 2]:.3f} s"
    for step, lateness in ((4, 0.075), (17, 0.2)):
        spans = [later - earlier for earlier, later in zip(times, times[step:])]
        assert min(spans) > step * 0.05 - lateness, f"{step + 1} requests within {min(spans):.3f} s"


def test_a_throttled_worker_holds_back_every_worker_of_the_node(tmp_path):
    first, second = NodePoliteness(tmp_path / "state"), NodePoliteness(tmp_path / "state")
    assert second.take_turn() == 0, "no limit, no back-off: no wait"
    first.slow_down(0.5)
    began = time.monotonic()
    second.take_turn()
    assert time.monotonic() - began >= 0.45


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

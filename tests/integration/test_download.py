"""Downloads against a real loopback HTTP server that injects faults."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curator_array.core.errors import ConfigError
from curator_array.stages.download import DownloadStage, local_name
from curator_array.stages.tasks import FailedTask, FileGroupTask
from curator_array.stages.urls import UrlGroupTask, UrlListStage, url_group_id
from tests.conftest import REPO
from tests.support.fault_server import FaultServer, random_bytes, sha256

FILES = {f"f{i}.bin": random_bytes(300_000 + i * 1000, i) for i in range(8)}
FILES["big.bin"] = random_bytes(4_000_000, 99)


@pytest.fixture
def server():
    srv = FaultServer(FILES, slow_s=2.0).start()
    yield srv
    srv.stop()


def stage(tmp_path, **kwargs):
    options = dict(retries=3, backoff_base_s=0.05, read_timeout_s=1.0, connect_timeout_s=1.0)
    options.update(kwargs)
    return DownloadStage(tmp_path / "dl", **options)


def task_for(*urls, expected=None):
    return UrlGroupTask(url_group_id(urls), urls=list(urls), expected=expected or {})


def assert_complete(path: str, name: str) -> None:
    assert Path(path).read_bytes() == FILES[name]
    assert not Path(path).name.endswith(".part")


@pytest.mark.parametrize("kind", ["ok", "flaky503", "retryafter", "drop", "norange"])
def test_faults_that_recover_end_complete_and_checksum_equal(server, tmp_path, kind):
    url = server.url(kind, "f1.bin")
    result = stage(tmp_path).process(task_for(url, expected={url: {"sha256": sha256(FILES["f1.bin"])}}))
    assert isinstance(result, FileGroupTask), getattr(result, "reason", "")
    assert_complete(result.files[0], "f1.bin")
    gets = server.gets(kind, "f1.bin")
    assert len(gets) == (1 if kind == "ok" else 2)
    if kind == "retryafter":
        assert gets[1]["time"] - gets[0]["time"] >= 0.95, "Retry-After: 1 was not honoured"
    if kind == "drop":
        assert gets[1]["range"] and gets[1]["range"].startswith("bytes=") and gets[1]["range"] != "bytes=0-"
    assert not list((tmp_path / "dl").glob("*.part"))


@pytest.mark.parametrize("kind,reason,requests", [("slow", "Timeout", 2), ("missing", "HTTP 404", 1)])
def test_faults_that_do_not_recover_become_failed_tasks(server, tmp_path, kind, reason, requests):
    url = server.url(kind, "f2.bin")
    result = stage(tmp_path, retries=1).process(task_for(url))
    assert isinstance(result, FailedTask)
    assert reason in result.reason and url in result.reason
    assert len(server.gets(kind, "f2.bin")) == requests
    final = tmp_path / "dl" / local_name(url)
    assert not final.exists(), "nothing may appear under the final name"


def test_checksum_mismatch_is_retried_then_fails(server, tmp_path):
    url = server.url("ok", "f3.bin")
    result = stage(tmp_path, retries=1).process(task_for(url, expected={url: {"sha256": "0" * 64}}))
    assert isinstance(result, FailedTask) and "does not match the expected sha256" in result.reason
    assert len(server.gets("ok", "f3.bin")) == 2
    assert not (tmp_path / "dl" / local_name(url)).exists()


def test_complete_files_are_not_fetched_again(server, tmp_path):
    url = server.url("ok", "f4.bin")
    first = stage(tmp_path).process(task_for(url, expected={url: {"size": len(FILES["f4.bin"])}}))
    again = stage(tmp_path).process(task_for(url, expected={url: {"size": len(FILES["f4.bin"])}}))
    assert first.files == again.files and len(server.gets("ok", "f4.bin")) == 1


def test_file_urls(tmp_path):
    source = tmp_path / "src dir" / "a.jsonl"
    source.parent.mkdir()
    source.write_text('{"text": "x"}\n')
    result = stage(tmp_path).process(task_for(source.as_uri()))
    assert Path(result.files[0]).read_text() == '{"text": "x"}\n'
    missing = stage(tmp_path).process(task_for((tmp_path / "nope.jsonl").as_uri()))
    assert isinstance(missing, FailedTask) and "no such file" in missing.reason


KILL_SNIPPET = r"""
import sys
from curator_array.stages.download import DownloadStage
from curator_array.stages.urls import UrlGroupTask
urls = sys.argv[2:]
DownloadStage(sys.argv[1], retries=0).process(UrlGroupTask("url-x", urls=urls))
"""


def test_download_killed_mid_file_resumes_without_refetching(tmp_path):
    srv = FaultServer(FILES, per_connection_rate=2_000_000).start()
    try:
        small = [srv.url("ok", "f5.bin"), srv.url("ok", "f6.bin")]
        big = srv.url("ok", "big.bin")
        child = subprocess.Popen([sys.executable, "-c", KILL_SNIPPET, str(tmp_path / "dl"), *small, big], cwd=REPO)
        part = tmp_path / "dl" / (local_name(big) + ".part")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (part.exists() and part.stat().st_size > 500_000):
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert part.exists() and 0 < part.stat().st_size < len(FILES["big.bin"])
        assert not (tmp_path / "dl" / local_name(big)).exists()
        result = DownloadStage(tmp_path / "dl").process(UrlGroupTask("url-x", urls=[*small, big]))
        assert isinstance(result, FileGroupTask)
        for url, name in zip([*small, big], ["f5.bin", "f6.bin", "big.bin"]):
            assert_complete(result.files[[*small, big].index(url)], name)
        assert [len(srv.gets("ok", n)) for n in ("f5.bin", "f6.bin")] == [1, 1], "completed files were fetched again"
        resumed = srv.gets("ok", "big.bin")[-1]["range"]
        assert resumed and int(resumed.split("=")[1].rstrip("-")) > 0
    finally:
        srv.stop()


def test_url_lists(tmp_path):
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "a.txt").write_text("# comment\nhttps://h/x.jsonl\n\nhttps://h/y.jsonl\n")
    (lists / "b.jsonl").write_text(json.dumps({"url": "https://h/z.jsonl", "sha256": "ab", "size": 3}) + "\n")
    tasks = UrlListStage([lists]).list_tasks()
    assert sorted(u for t in tasks for u in t.urls) == ["https://h/x.jsonl", "https://h/y.jsonl", "https://h/z.jsonl"]
    z = next(t for t in tasks if t.urls == ["https://h/z.jsonl"])
    assert z.expected == {"https://h/z.jsonl": {"sha256": "ab", "size": 3}}
    (lists / "a.txt").write_text("https://h/new.jsonl\n# comment\nhttps://h/x.jsonl\n\nhttps://h/y.jsonl\n")
    again = {t.task_id for t in UrlListStage([lists]).list_tasks()}
    assert {t.task_id for t in tasks} <= again, "ids depend on the URL, not its position"
    (lists / "c.txt").write_text("https://h/y.jsonl\n")
    with pytest.raises(ConfigError, match=r"https://h/y.jsonl is listed twice \(.*a.txt:5 and .*c.txt:1\)"):
        UrlListStage([lists]).list_tasks()


def test_bad_url_lines_name_file_and_line(tmp_path):
    from curator_array.core.errors import InputError

    (tmp_path / "l.txt").write_text("https://ok/a\nftp://nope/b\n")
    with pytest.raises(InputError, match=r"l.txt:2: 'ftp://nope/b' is not an http"):
        UrlListStage([tmp_path / "l.txt"]).list_tasks()

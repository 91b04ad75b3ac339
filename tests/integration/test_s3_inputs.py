"""Inputs in an object store, against a real S3 API: moto's standalone server on loopback
(``tests/support/s3_server.py``), reached over HTTP by pyarrow's S3 filesystem as in a run.

A prefix is read as a directory is (same tasks, same output bytes), its listing frozen with
the run; a crawl is read from ``s3://commoncrawl/`` as from its HTTP mirror; a missing bucket
and refused credentials stop the run before any work, in one line, with exit 2; credentials
never reach the checkpoint or the log.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_array.core.layout import CheckpointLayout
from tests.conftest import SAMPLE, curator_cli, curator_here
from tests.support.s3_server import S3Server, ThrottlingProxy, started
from tests.support.warcs import write_warc
from tests.web_pages import pages

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
SECRET = "s3cr3t-never-pinned-4f1d"
CRAWL = "CC-TEST-2024-01"


@pytest.fixture(scope="module")
def store():
    server = started()
    yield server
    server.stop()


def env_of(server: S3Server) -> dict[str, str]:
    return {**server.env, "AWS_SECRET_ACCESS_KEY": SECRET}


def visible(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.name.startswith(".")}


def test_a_prefix_is_read_as_the_same_files_on_disk_and_no_credential_is_kept(store, tmp_path):
    store.upload(SAMPLE / "jsonl", "s3://inputs/sample/jsonl")
    local, remote = tmp_path / "local", tmp_path / "remote"
    curator_here("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", str(local), *SMALL)
    done = curator_cli("run", "--input-dir", "s3://inputs/sample/jsonl", "--output-dir", str(remote), *SMALL,
                       env=env_of(store))
    assert visible(remote) == visible(local) != {}, "the same task ids, so the same files, byte for byte"
    layout = CheckpointLayout(remote)
    files = [p for p in layout.root.rglob("*") if p.is_file()]
    assert any(b"s3://inputs/sample/jsonl" in p.read_bytes() for p in files), "the run's options name the prefix"
    kept = [p for p in files if SECRET.encode() in p.read_bytes()]
    assert not kept and SECRET not in done.stderr + done.stdout, "credentials are never pinned nor logged"


def test_a_prefix_listing_is_frozen_and_a_changed_object_refused(store, tmp_path):
    store.upload(SAMPLE / "jsonl", "s3://frozen/in")
    out = tmp_path / "out"
    shard = {"NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "2"}
    first = curator_cli("run", "--input-dir", "s3://frozen/in", "--output-dir", str(out), *SMALL,
                        env={**env_of(store), **shard, "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "0"})
    assert "completed" in first.stderr
    extra, changed = tmp_path / "extra", tmp_path / "changed"
    extra.mkdir()
    (extra / "added.jsonl").write_text('{"text": "a file added after the listing froze"}\n')
    store.upload(extra, "s3://frozen/in")  # not part of the run: its listing is frozen
    changed.mkdir()
    for path in sorted((SAMPLE / "jsonl").glob("*.jsonl")):
        (changed / path.name).write_bytes(path.read_bytes() + b'{"text": "one more line"}\n')
    store.upload(changed, "s3://frozen/in")
    second = curator_cli("run", "--input-dir", "s3://frozen/in", "--output-dir", str(out), *SMALL, check=False,
                         env={**env_of(store), **shard, "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "1"})
    assert second.returncode == 2, second.stderr[-2000:]
    assert "changed since the run froze its listing" in second.stderr and "s3://frozen/in/" in second.stderr


def test_a_crawl_is_read_from_the_store_as_from_its_warcs_on_disk(store, tmp_path):
    directory = tmp_path / "warcs"
    archive = tmp_path / "archive"
    names = []
    for index in range(3):
        records, _ = pages(f"site{index}.example")
        name = f"crawl-data/{CRAWL}/segments/17000{index}/warc/CC-{index:05d}.warc.gz"
        (archive / name).parent.mkdir(parents=True, exist_ok=True)
        write_warc(archive / name, records)
        directory.mkdir(exist_ok=True)
        (directory / Path(name).name).write_bytes((archive / name).read_bytes())
        names.append(name)
    (archive / f"crawl-data/{CRAWL}/warc.paths.gz").write_bytes(gzip.compress(("\n".join(names) + "\n").encode()))
    store.upload(archive, "s3://commoncrawl/")
    from_store, from_disk = tmp_path / "store", tmp_path / "disk"
    curator_cli("run", "--crawl", CRAWL, "--crawl-base-url", "s3://commoncrawl/", "--output-dir", str(from_store),
                "--pipeline", "commoncrawl", *SMALL, env=env_of(store))
    curator_here("run", "--input-dir", str(directory), "--input-file-type", "warc", "--output-dir", str(from_disk),
                 "--pipeline", "commoncrawl", *SMALL)

    def texts(out: Path) -> dict[str, str]:
        return {row["url"]: row["text"] for path in sorted(out.glob("*.parquet")) for row in pq.read_table(path).to_pylist()}

    assert texts(from_store) == texts(from_disk) and texts(from_disk)


def test_a_prefix_is_read_through_a_throttling_store(store, tmp_path):
    """503 SlowDown past pyarrow's own three tries: the reader tries each object again with
    backoff, as a crawl download does, and the run ends as on disk."""
    store.upload(SAMPLE / "jsonl", "s3://throttled-run/in")
    local, remote = tmp_path / "local", tmp_path / "remote"
    curator_here("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", str(local), *SMALL)
    proxy = ThrottlingProxy(store, refusals=4, max_objects=2)
    try:
        curator_cli("run", "--input-dir", "s3://throttled-run/in", "--output-dir", str(remote), *SMALL,
                    env=proxy.env)
    finally:
        proxy.stop()
    assert len(proxy.refused) == 2 and set(proxy.refused.values()) == {4}, proxy.refused
    assert visible(remote) == visible(local) != {}


def test_a_throttling_store_is_waited_out_by_the_whole_node(store, tmp_path, monkeypatch, caplog):
    """503 SlowDown past the SDK's own retries: the download stage backs the node off and
    tries again, as for a crawl's HTTP server, and the object arrives whole."""
    from curator_array.stages.download import DownloadStage
    from curator_array.stages.tasks import FileGroupTask
    from curator_array.stages.urls import UrlGroupTask, url_group_id

    store.upload(SAMPLE / "jsonl", "s3://throttled/in")
    proxy = ThrottlingProxy(store, refusals=4)  # the SDK tries 3 times, then the stage waits and tries again
    try:
        for name, value in proxy.env.items():
            monkeypatch.setenv(name, value)
        url = "s3://throttled/in/part-003.jsonl"
        stage = DownloadStage(tmp_path / "dl", retries=3, backoff_base_s=0.05)
        with caplog.at_level("WARNING"):
            result = stage.process(UrlGroupTask(url_group_id([url]), urls=[url]))
        assert isinstance(result, FileGroupTask), getattr(result, "reason", "")
        assert Path(result.files[0]).read_bytes() == (SAMPLE / "jsonl" / "part-003.jsonl").read_bytes()
        assert "the store is throttling requests" in caplog.text
        assert max(proxy.refused.values()) == 4
    finally:
        proxy.stop()


def test_url_inputs_run_on_an_element_of_one_cpu(tmp_path):
    """The download workers take no CPU of Ray's count, so the reader always has one."""
    urls = tmp_path / "urls.txt"
    urls.write_text("".join(f"file://{path}\n" for path in sorted((SAMPLE / "jsonl").glob("*.jsonl"))))
    out = tmp_path / "out"
    curator_cli("run", "--input-urls", str(urls), "--output-dir", str(out), *SMALL)
    assert len(visible(out)) == len(list((SAMPLE / "jsonl").glob("*.jsonl")))


@pytest.mark.parametrize("problem", ["missing bucket", "refused credentials"])
def test_a_store_that_cannot_serve_the_run_stops_it_before_any_work(store, tmp_path, problem):
    lists = tmp_path / "urls.txt"
    lists.write_text("s3://inputs/sample/jsonl/part-000.jsonl\n")
    if problem == "missing bucket":
        server, inputs = store, ["--input-dir", "s3://no-such-bucket/in"]
        expected = "the bucket 'no-such-bucket' does not exist"
    else:
        server = S3Server(authenticated=True).start()
        inputs = ["--input-urls", str(lists)]
        expected = "access denied: the store refused these credentials"
    try:
        for given in (inputs, ["--input-urls", str(lists)] if problem == "missing bucket" else inputs):
            if problem == "missing bucket" and given[0] == "--input-urls":
                lists.write_text("s3://no-such-bucket/part-000.jsonl\n")
                expected = "s3://no-such-bucket: the bucket does not exist"
            out = tmp_path / f"out-{given[0].strip('-')}"
            done = curator_cli("run", *given, "--output-dir", str(out), *SMALL, check=False, env=env_of(server))
            assert done.returncode == 2, done.stderr[-2000:]
            errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
            assert len(errors) == 1 and expected in errors[0], done.stderr[-2000:]
            assert not out.exists() or not any(p for p in out.iterdir() if not p.name.startswith(".")), \
                "no output before the store was reached"
            assert SECRET not in done.stderr
    finally:
        if server is not store:
            server.stop()

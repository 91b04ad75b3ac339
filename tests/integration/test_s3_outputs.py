"""Outputs in an object store, against a real S3 API: moto's standalone server on loopback
(``tests/support/s3_server.py``), written over HTTP as a run writes them.

A prefix receives the objects a directory receives, byte for byte (documents, rolled parts of
streamed WARC tasks, the rows ``--keep-removed`` keeps), through a store that throttles; an element killed while an object is
uploading leaves no object under that name, and the task's rerun aborts the upload it left; a
store that cannot take the output stops the run before anything is written, in one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import SAMPLE, curator_cli, curator_here, need
from tests.support.s3_server import S3Server, ThrottlingProxy, incompressible_jsonl, started
from tests.support.warcs import write_warc
from tests.web_pages import pages

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
SPOOL = Path(tempfile.gettempdir()) / f"curator-array-spool-{os.getuid()}"


@pytest.fixture(scope="module")
def store():
    server = started()
    server.filesystem().create_dir("outputs")
    yield server
    server.stop()


def files_under(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, the checkpoint's records left out."""
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and ".nemo_curator_metadata" not in p.parts and ".downloads" not in p.parts}


def test_a_jsonl_run_writes_to_a_prefix_what_it_writes_to_a_directory(store, tmp_path):
    store.upload(SAMPLE / "jsonl", "s3://inputs/jsonl")
    chosen = ["--min-words", "40", "--keep-removed", "--output-file-type", "jsonl", *SMALL]
    local = tmp_path / "local"
    curator_here("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", str(local), *chosen)
    checkpoint = tmp_path / "checkpoint"
    run = ("run", "--input-dir", "s3://inputs/jsonl", "--output-dir", "s3://outputs/jsonl",
           "--checkpoint-path", str(checkpoint), *chosen)
    proxy = ThrottlingProxy(store, refusals=2, methods=("PUT",), max_objects=3)  # their first two PUTs: 503
    try:
        curator_cli(*run, env=proxy.env)
    finally:
        proxy.stop()
    assert list(proxy.refused.values()) == [2, 2, 2], "three objects were refused twice each, then taken"
    expected = files_under(local)
    assert any(name.startswith(".removed/") for name in expected) and any("/" not in name for name in expected)
    assert store.objects("s3://outputs/jsonl") == expected, "the same objects as files, the removed rows' too"
    status = json.loads(curator_cli("status", "--checkpoint-path", str(checkpoint), "--json").stdout)
    assert status["completed_count"] == 1 and status["final_rows_out"] == sum(
        name.count(b"\n") for key, name in expected.items() if "/" not in key), status
    again = curator_cli(*run, env=store.env)
    assert "already complete" in again.stderr + again.stdout
    assert store.objects("s3://outputs/jsonl") == expected and store.uploads("outputs") == []


def test_a_warc_run_from_a_prefix_rolls_its_parts_into_objects(store, tmp_path):
    warcs = tmp_path / "warcs"
    warcs.mkdir()
    for index in range(2):
        records, _ = pages(f"site{index}.example")
        write_warc(warcs / f"CC-{index:05d}.warc.gz", records)
    store.upload(warcs, "s3://inputs/warcs")
    chosen = ["--input-file-type", "warc", "--pipeline", "commoncrawl", "--records-per-batch", "2", "--keep-removed",
              *SMALL]
    local = tmp_path / "local"
    curator_here("run", "--input-dir", str(warcs), "--output-dir", str(local), *chosen)
    curator_cli("run", "--input-dir", "s3://inputs/warcs", "--output-dir", "s3://outputs/warcs",
                "--checkpoint-path", str(tmp_path / "checkpoint"), *chosen, env=store.env)
    expected = files_under(local)
    documents = [name for name in expected if not name.startswith(".removed/")]
    assert len(documents) == 2 and all(name.endswith(".00000.parquet") for name in documents), sorted(expected)
    assert len(expected) > len(documents), "some pages were dropped and kept"
    assert store.objects("s3://outputs/warcs") == expected


def test_an_element_killed_mid_upload_leaves_no_object_and_its_rerun_aborts_the_upload(store, tmp_path):
    inputs = tmp_path / "big"
    incompressible_jsonl(inputs, files=2, megabytes=12)
    local = tmp_path / "local"
    curator_here("run", "--input-dir", str(inputs), "--output-dir", str(local), *SMALL)
    checkpoint = tmp_path / "checkpoint"
    run = [sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(inputs), "--output-dir",
           "s3://outputs/killed", "--checkpoint-path", str(checkpoint), *SMALL]
    proxy = ThrottlingProxy(store, refusals=0, part_delay_s=3.0)
    try:
        element = subprocess.Popen(run, env={**os.environ, **proxy.env}, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while not store.uploads("outputs") and element.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        in_flight = store.uploads("outputs")
        os.killpg(element.pid, signal.SIGKILL)
        element.wait(30)
    finally:
        proxy.stop()
    assert in_flight, "no upload was caught in flight"
    deadline, spooled = time.monotonic() + 30, set()
    while not spooled and time.monotonic() < deadline:  # the writer's process is gone once reaped
        spooled = {p for p in SPOOL.glob("*") if not Path(f"/proc/{p.name.partition('-')[0]}").exists()}
        time.sleep(0.2)
    assert spooled, "the killed writer's spool file is on disk"
    left = store.objects("s3://outputs/killed")
    assert not {Path(key).name for key in in_flight} & set(left), "an object appeared before its upload completed"
    assert store.uploads("outputs") == in_flight, "the killed upload is still open"
    curator_cli(*run[3:], env=store.env)
    assert store.uploads("outputs") == [], "the rerun aborted the upload the killed element left"
    assert not any(p.exists() for p in spooled), "the killed writer's spool file was removed"
    assert store.objects("s3://outputs/killed") == files_under(local) != {}


@pytest.mark.parametrize("problem", ["missing bucket", "refused credentials", "--new-run"])
def test_an_output_prefix_the_run_cannot_use_stops_it_before_anything_is_written(store, tmp_path, problem):
    server, output, extra = store, "s3://outputs/refused", []
    expected = {"missing bucket": "--output-dir s3://no-such-bucket/out: s3://no-such-bucket: the bucket does not exist",
                "refused credentials": "--output-dir s3://outputs/refused: s3://outputs: access denied",
                "--new-run": "--new-run moves the previous run's outputs aside, which an object store cannot do"}[problem]
    if problem == "missing bucket":
        output = "s3://no-such-bucket/out"
    elif problem == "refused credentials":
        server = S3Server(authenticated=True).start()
    else:
        extra = ["--new-run"]
    try:
        checkpoint = tmp_path / "checkpoint"
        done = curator_cli("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", output, "--checkpoint-path",
                           str(checkpoint), *extra, *SMALL, check=False, env=server.env)
    finally:
        if server is not store:
            server.stop()
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and expected in errors[0], done.stderr[-2000:]
    assert not checkpoint.exists(), "nothing is written before the store is reached"


def test_the_later_phases_read_and_write_the_prefix_as_a_directory(store, tmp_path):
    """Dedup (its staged curated files, its removal's rewrites, the removed copies kept),
    selection by model (run-wide top fraction, buckets as prefixes) and token files: the same
    objects under the prefix as files under the directory."""
    from tests.support.quality_corpus import train_model, trainer_installed
    from tests.support.tokenizer import train_tokenizer

    need(trainer_installed(), "the fastText trainer is not installed (make install does it)")
    texts = [json.loads(line)["text"] for path in sorted((SAMPLE / "jsonl").glob("*.jsonl"))
             for line in path.read_text().splitlines()]
    tokenizer = train_tokenizer(texts, tmp_path / "tokenizer" / "tokenizer.json", vocab_size=2000)
    model = train_model(tmp_path / "model")
    chosen = ["--dedup", "exact", "--dedup-keep-removed", "--quality-model", f"hq={model}", "--keep-top-fraction",
              "hq=0.5", "--quality-buckets", "3", "--partition-by-bucket", "--keep-removed", "--tokenize",
              str(tokenizer), "--token-file-size", "200000", "--output-file-type", "jsonl", *SMALL]
    local = tmp_path / "local"
    curator_here("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", str(local), *chosen)
    curator_cli("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", "s3://outputs/phases",
                "--checkpoint-path", str(tmp_path / "checkpoint"), *chosen, env=store.env)
    expected = files_under(local)
    assert any(name.startswith("tokens/part-") for name in expected) and "tokens/manifest.json" in expected
    assert any(name.startswith(".removed/dedup/") for name in expected), sorted(expected)
    assert any(name.startswith("bucket=") for name in expected), sorted(expected)
    assert store.objects("s3://outputs/phases") == expected

"""The object-store adapter's pure parts: URLs, the endpoint as the AWS SDKs read it, and one
line for each way a store refuses (without the SDK's request ids)."""

from __future__ import annotations

import pytest

from curator_array.core.errors import ConfigError
from curator_array.storage.s3 import S3Url, StoreSettings, is_s3, store_error


def test_urls_name_a_bucket_and_a_prefix():
    url = S3Url.parse("s3://commoncrawl/crawl-data/CC-MAIN-2024-10/")
    assert (url.bucket, url.key, url.path, str(url)) == (
        "commoncrawl", "crawl-data/CC-MAIN-2024-10", "commoncrawl/crawl-data/CC-MAIN-2024-10",
        "s3://commoncrawl/crawl-data/CC-MAIN-2024-10")
    assert url.join("warc.paths.gz") == "s3://commoncrawl/crawl-data/CC-MAIN-2024-10/warc.paths.gz"
    assert S3Url.parse("s3://bucket").path == "bucket" and is_s3("s3://b/k") and not is_s3("/data/s3://x")
    for bad in ("s3:///key", "https://bucket/key"):
        with pytest.raises(ConfigError):
            S3Url.parse(bad)


def test_the_endpoint_and_region_are_read_as_the_aws_sdks_read_them():
    assert StoreSettings.from_env({}) == StoreSettings(None, "https", "us-east-1")
    assert StoreSettings.from_env({"AWS_ENDPOINT_URL": "http://minio:9000/", "AWS_DEFAULT_REGION": "eu-west-1"}) == \
        StoreSettings("minio:9000", "http", "eu-west-1")
    both = {"AWS_ENDPOINT_URL": "http://general:1", "AWS_ENDPOINT_URL_S3": "https://s3only:2", "AWS_REGION": "x-1",
            "AWS_DEFAULT_REGION": "y-2"}
    assert StoreSettings.from_env(both) == StoreSettings("s3only:2", "https", "x-1"), "the S3 variable first"
    for bad in ("minio:9000", "ftp://minio", "http://"):
        with pytest.raises(ConfigError, match="AWS_ENDPOINT_URL_S3=.*is not an http:// or https:// URL"):
            StoreSettings.from_env({"AWS_ENDPOINT_URL_S3": bad})


@pytest.mark.parametrize("text, says, retryable, throttled", [
    ("When reading information for key 'x' in bucket 'b': AWS Error ACCESS_DENIED during HeadObject operation: "
     "No response body.", "access denied", False, False),
    ("AWS Error INVALID_ACCESS_KEY_ID during ListObjectsV2 operation: The AWS Access Key Id you provided does not "
     "exist in our records. (Request ID: sYUqF9m0)", "access denied", False, False),
    ("AWS Error NO_SUCH_BUCKET during ListObjectsV2 operation: The specified bucket does not exist "
     "(Request ID: RC2jXx9D)", "the bucket does not exist", False, False),
    ("AWS Error SLOW_DOWN during GetObject operation: Please reduce your request rate.", "throttling", True, True),
    ("AWS Error UNKNOWN (HTTP status 503) during GetObject operation: Unable to parse ExceptionName",
     "throttling", True, True),
    ("s3://b/x: AWS Error SERVICE_UNAVAILABLE during GetObject operation: ", "throttling", True, True),
    ("AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 7, Couldn't connect to server "
     "(Request ID: abc)", "curlCode: 7", True, False),
])
def test_a_refusal_is_one_line_saying_whether_to_try_again(text, says, retryable, throttled):
    error = store_error(OSError(text), "s3://b/x")
    assert says in str(error) and str(error).startswith("s3://b/x: ") and "Request ID" not in str(error)
    assert (error.retryable, error.throttled) == (retryable, throttled)
    assert not store_error(FileNotFoundError("gone"), "s3://b/x").retryable


@pytest.fixture
def silent_store():
    """A TCP listener that takes connections and never answers: a store behind a black hole."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", held
    server.close()
    for connection in held:
        connection.close()


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("where", ["input", "output", "submitted input"])
def test_a_store_that_cannot_be_reached_is_refused_in_one_line_naming_endpoint_and_bucket(where, silent_store,
                                                                                         tmp_path):
    """Refused (exit 2) after one request, not the SDK's retries; the line names the endpoint and the
    bucket, and never a checkpoint the user did not give. ``submit`` checks too, a dry run included."""
    from tests.conftest import REPO, SAMPLE, curator_cli

    silent, connections = silent_store
    closed = f"http://127.0.0.1:{free_port()}"
    for endpoint in (closed, silent):
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
        paths = (["--input-dir", "s3://in-bucket/data", "--output-dir", str(tmp_path / "out")] if where == "input" else
                 ["--input-dir", str(SAMPLE / "jsonl"), "--output-dir", "s3://out-bucket/data",
                  "--checkpoint-path", str(tmp_path / "ckpt")])
        if where == "submitted input":
            done = curator_cli("submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"), "--total-shards",
                               "2", "--dry-run", env={**env, "INPUT_DIR": "s3://in-bucket/data",
                                                      "OUTPUT_DIR": str(tmp_path / "out")}, check=False)
        else:
            done = curator_cli("run", *paths, "--num-cpus", "1", "--no-progress", env=env, check=False)
        bucket = "out-bucket" if where == "output" else "in-bucket"
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"cannot reach the object store at {endpoint} for bucket '{bucket}'" in done.stderr, done.stderr
    assert len(connections) == 1, "one request to a store that never answers, not the SDK's retries"


def test_an_object_store_output_without_a_checkpoint_names_the_option_given():
    from tests.conftest import SAMPLE, curator_cli

    done = curator_cli("run", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", "s3://b/out", check=False)
    assert done.returncode == 2 and "--output-dir s3://b/out is in an object store: give --checkpoint-path" in \
        done.stderr and "the checkpoint s3" not in done.stderr, done.stderr

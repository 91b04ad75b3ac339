"""A real S3 API on loopback: moto's standalone server in a process of its own, installed into
a site of its own (tests.support.reference_site; never into our venv). The suite talks to it over HTTP with pyarrow's S3
filesystem, as the runs do; ``authenticated`` servers refuse any key they have not issued."""

from __future__ import annotations

import base64
import json
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.reference_site import ensure_reference_site, reference_environment

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Server:
    def __init__(self, authenticated: bool = False):
        self.authenticated = authenticated
        self.port = _free_port()
        self.process: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        """What a run needs to reach this store: the endpoint, as the AWS SDKs read it, and keys."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{self.port}"}

    def start(self) -> S3Server:
        ensure_reference_site("moto-site")  # RuntimeError says why it cannot be
        env = reference_environment("moto-site", path=())
        if self.authenticated:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.1)
        self._first_answer(deadline)
        return self

    def _first_answer(self, deadline: float) -> None:
        """One request answered before the tests': moto sets up its S3 backend on the first one,
        which on a loaded host took longer than a run waits for a store's first answer (3 s)."""
        import urllib.error
        import urllib.request

        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=max(1.0, deadline - time.monotonic()))
        except urllib.error.HTTPError:
            pass  # refused (an authenticated store): answered all the same

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

    def client(self):
        """boto3 on this store, for what pyarrow cannot see (incomplete multipart uploads)."""
        import boto3

        return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.port}", region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def uploads(self, bucket: str) -> list[str]:
        """Keys of the multipart uploads begun in ``bucket`` and neither completed nor aborted."""
        return sorted(u["Key"] for u in self.client().list_multipart_uploads(Bucket=bucket).get("Uploads", ()))

    def objects(self, url: str) -> dict[str, bytes]:
        """Every object under ``s3://bucket/prefix``, by key relative to the prefix (hidden ones too)."""
        import pyarrow.fs as pafs

        store = self.filesystem()
        root = url.removeprefix("s3://").rstrip("/")
        infos = store.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        found = {}
        for info in infos:
            if info.type == pafs.FileType.File:
                with store.open_input_stream(info.path, compression=None) as stream:
                    found[info.path[len(root) + 1:]] = stream.read()
        return found

    def filesystem(self):
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1", scheme="http",
                                 endpoint_override=f"127.0.0.1:{self.port}", allow_bucket_creation=True)

    def upload(self, directory: Path, url: str) -> list[str]:
        """Every file under ``directory`` to ``s3://bucket/prefix`` (the bucket made if need be)."""
        store = self.filesystem()
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        store.create_dir(bucket)
        keys = []
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            key = f"{bucket}/{prefix.strip('/')}/{path.relative_to(directory).as_posix()}".replace("//", "/")
            with store.open_output_stream(key, compression=None) as out:  # as the bytes are, even .gz
                out.write(path.read_bytes())
            keys.append(key)
        return keys


def started() -> S3Server:
    """A running server; one that cannot start fails the test in CI and skips it elsewhere."""
    from tests.conftest import need

    server = S3Server()
    try:
        server.start()
    except RuntimeError as problem:
        need(False, str(problem))
    return server


class ThrottlingProxy:
    """A loopback proxy in front of ``server`` that answers the first ``refusals`` requests of
    each object by one of ``methods`` with 503 SlowDown, as a store shedding load does, holds
    each part of a multipart upload ``part_delay_s`` (a slow link: an upload a test can catch
    in flight), and forwards everything else; with ``max_objects``, only that many objects are refused."""

    def __init__(self, server: S3Server, refusals: int, methods: tuple[str, ...] = ("GET",), part_delay_s: float = 0,
                 max_objects: int | None = None):
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.refused: dict[str, int] = {}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # answers boto3's "Expect: 100-continue" at once (else it waits 1 s)

            def log_message(self, *args):
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                sent = self.rfile.read(length) if length else None  # read even when refused: the connection goes on
                if "partNumber=" in self.path:
                    time.sleep(part_delay_s)
                full = max_objects is not None and self.path not in proxy.refused and len(proxy.refused) >= max_objects
                if self.command in methods and not full and proxy.refused.get(self.path, 0) < refusals:
                    proxy.refused[self.path] = proxy.refused.get(self.path, 0) + 1
                    body = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
                            b"<Message>Please reduce your request rate.</Message></Error>")
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                connection.request(self.command, self.path, sent,
                                   {k: v for k, v in self.headers.items() if k.lower() != "expect"})
                answer = connection.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", answer.getheader("Content-Length", "0") if self.command == "HEAD"
                                 else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def env(self) -> dict[str, str]:
        return {**CREDENTIALS, "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{self.port}"}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def incompressible_jsonl(directory: Path, files: int, megabytes: int) -> None:
    """Text that compresses little, so each task's Parquet file is uploaded in several parts."""
    directory.mkdir()
    rng = random.Random(7)
    for number in range(files):
        with open(directory / f"big-{number}.jsonl", "w") as out:
            for row in range(megabytes * 256):
                text = base64.b64encode(rng.randbytes(3000)).decode()
                out.write(json.dumps({"id": f"{number}-{row}", "text": text}) + "\n")

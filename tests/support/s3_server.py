"""A real S3 API on loopback: moto's standalone server in a process of its own, installed into
``.cache/moto-site`` (never into our venv). The suite talks to it over HTTP with pyarrow's S3
filesystem, as the runs do; ``authenticated`` servers refuse any key they have not issued."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.reference_site import ensure_reference_site

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
        site = ensure_reference_site("moto-site")  # RuntimeError says why it cannot be
        env = dict(os.environ, PYTHONPATH=str(site))
        if self.authenticated:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

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


class ThrottlingProxy:
    """A loopback proxy in front of ``server`` that answers the first ``refusals`` GETs of each
    object with 503 SlowDown, as a store shedding load does, and forwards everything else."""

    def __init__(self, server: S3Server, refusals: int):
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.refused: dict[str, int] = {}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _forward(self):
                if self.command == "GET" and proxy.refused.get(self.path, 0) < refusals:
                    proxy.refused[self.path] = proxy.refused.get(self.path, 0) + 1
                    body = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
                            b"<Message>Please reduce your request rate.</Message></Error>")
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                connection.request(self.command, self.path, self.rfile.read(length) if length else None,
                                   {k: v for k, v in self.headers.items()})
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

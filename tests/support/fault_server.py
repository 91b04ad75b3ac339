"""A loopback HTTP file server that injects faults by path prefix and records what it saw.

    /ok/NAME          plain, honours Range
    /flaky503/NAME    first request 503, then ok
    /retryafter/NAME  first request 429 with Retry-After: 1, then ok
    /drop/NAME        first request closes the connection half-way through the body
    /norange/NAME     ignores Range; first request drops half-way
    /slow/NAME        waits ``slow_s`` before answering (past a client's timeout)
    /slowdown/NAME    first request 503 "Slow Down" with Retry-After: 1, then ok
    /mirror/NAME      the behaviour ``modes`` gives NAME (default ok): a whole tree, such as
                      a fake ``crawl-data/``, under one base URL, with a fault per file
    anything else     404

Used by the download tests and benchmarks (with bandwidth throttling). ``gather(n)`` holds
every body until ``n`` are being sent at once (or a deadline passes), once: a test then sees
as many concurrent downloads as its clients can make, however slowly they start.
"""

from __future__ import annotations

import hashlib
import random
import sys
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Throttle:
    """Token bucket shared by all connections (aggregate bytes per second)."""

    def __init__(self, rate: float | None):
        self.rate = rate
        self.lock = threading.Lock()
        self.next_free = time.monotonic()

    def take(self, size: int) -> None:
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_free)
            self.next_free = start + size / self.rate
        delay = start - now
        if delay > 0:
            time.sleep(delay)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that hangs up (past its timeout, or its element killed) is what these tests
        provoke; only other errors are printed, as ``socketserver`` does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FaultServer:
    def __init__(self, files: dict[str, bytes], *, slow_s: float = 3.0, aggregate_rate: float | None = None,
                 per_connection_rate: float | None = None, chunk: int = 64 * 1024,
                 modes: dict[str, str] | None = None):
        self.files = files
        self.modes = modes or {}
        self.slow_s = slow_s
        self.throttle = Throttle(aggregate_rate)
        self.per_connection_rate = per_connection_rate
        self.chunk = chunk
        self.lock = threading.Lock()
        self.requests: dict[str, list[dict]] = defaultdict(list)
        self.active = 0
        self.peak_active = 0
        self.bytes_sent = 0
        self.busy_s = 0.0  # time with at least one body being sent
        self._busy_since = 0.0
        self.gathered = threading.Condition(self.lock)
        self.gather_count, self.gather_until = 0, 0.0
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, kind: str, name: str) -> str:
        return f"{self.base_url}/{kind}/{name}"

    def start(self) -> FaultServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def gather(self, count: int, within_s: float) -> None:
        """Hold the bodies from now until ``count`` are in flight at once, or ``within_s`` passes."""
        with self.lock:
            self.gather_count, self.gather_until = count, time.monotonic() + within_s

    def gets(self, kind: str, name: str) -> list[dict]:
        return self.requests[f"/{kind}/{name}"]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path
                with server.lock:
                    seen = server.requests[path]
                    record = {"time": time.time(), "range": self.headers.get("Range")}
                    seen.append(record)
                    first = len(seen) == 1
                parts = path.strip("/").split("/", 1)
                kind, name = (parts + [""])[:2]
                if kind == "mirror":
                    kind = server.modes.get(name, "ok")
                body = server.files.get(name)
                if body is None or kind not in ("ok", "flaky503", "retryafter", "drop", "norange", "slow", "slowdown"):
                    return self._simple(404, b"not found")
                if kind == "slowdown" and first:
                    return self._simple(503, b"Slow Down", {"Retry-After": "1"})
                if kind == "flaky503" and first:
                    return self._simple(503, b"busy")
                if kind == "retryafter" and first:
                    return self._simple(429, b"slow down", {"Retry-After": "1"})
                if kind == "slow":
                    time.sleep(server.slow_s)
                start = 0
                ranged = self.headers.get("Range")
                if ranged and kind != "norange":
                    start = int(ranged.split("=", 1)[1].split("-", 1)[0])
                    if start >= len(body):
                        return self._simple(416, b"")
                payload = body[start:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Accept-Ranges", "none" if kind == "norange" else "bytes")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                cut = len(payload) // 2 if kind in ("drop", "norange") and first else None
                self._stream(payload, cut)
                record["body_end"] = time.time()

            def _stream(self, payload: bytes, cut: int | None) -> None:
                with server.lock:
                    if server.active == 0:
                        server._busy_since = time.monotonic()
                    server.active += 1
                    server.peak_active = max(server.peak_active, server.active)
                    if server.active >= server.gather_count:
                        server.gather_count = 0
                        server.gathered.notify_all()
                    while server.gather_count and (left := server.gather_until - time.monotonic()) > 0:
                        server.gathered.wait(left)
                try:
                    limit = len(payload) if cut is None else cut
                    sent = 0
                    while sent < limit:
                        piece = payload[sent : min(limit, sent + server.chunk)]
                        server.throttle.take(len(piece))
                        if server.per_connection_rate:
                            time.sleep(len(piece) / server.per_connection_rate)
                        self.wfile.write(piece)
                        sent += len(piece)
                        with server.lock:
                            server.bytes_sent += len(piece)
                    if cut is not None:
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    self.close_connection = True
                finally:
                    with server.lock:
                        server.active -= 1
                        if server.active == 0:
                            server.busy_s += time.monotonic() - server._busy_since

            def _simple(self, code: int, body: bytes, headers: dict | None = None) -> None:
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

"""``DownloadStage``: fetch the URLs of a task to disk, then hand the files to the reader.

Downloads are bound by each node's network and disk, not by cluster CPUs, so the stage
asks for ``num_workers_per_node`` workers (default 2) instead of a CPU-sized pool. On
clusters started by our clients each node also offers that many download slots as a Ray
resource and every download worker takes one, which makes the per-node cap hard.

The workers are actors, each with its next inputs already queued and one HTTP session kept
open: a worker downloads one file at a time but never waits for the scheduler or a new
connection between files, which matters when files are small.

Every file is streamed to ``NAME.part`` and renamed when complete (and verified when the
list gave a size or sha256), so a final name never holds a partial file. A ``.part`` left
by an interrupted attempt is resumed with ``Range`` when the server supports it. An
``s3://`` URL is read from the object store (``storage.s3``) under the same retries and
politeness: a store that throttles (503 SlowDown, 429) slows the whole node down.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import os
import random
import shutil
import time
import urllib.parse
from pathlib import Path
from typing import Any

import requests

from ..core.atomic import fsync_directory
from ..core.errors import ConfigError
from ..storage.s3 import StoreError, download, is_s3
from .base import ProcessingStage, Resources
from .defaults import (
    DOWNLOAD_CONNECT_TIMEOUT_S,
    DOWNLOAD_READ_TIMEOUT_S,
    DOWNLOAD_RETRIES,
    DOWNLOAD_SLOT,
    DOWNLOAD_WORKERS_PER_NODE,
)
from .politeness import NodePoliteness, state_file
from .process_state import PerProcess
from .tasks import FailedTask, FileGroupTask, Task
from .urls import UrlGroupTask

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}
# A server answering these is throttling the client: the whole node backs off.
THROTTLING_STATUS = {429, 503}
CHUNK = 1 << 20
# Small reads: bytes of a read that a dropped connection interrupts are lost, so keep it short.
NETWORK_CHUNK = 64 * 1024


class DownloadError(Exception):
    def __init__(self, message: str, retryable: bool, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


def local_name(url: str) -> str:
    """Deterministic and unique per URL, keeping the original file name readable."""
    base = os.path.basename(urllib.parse.urlparse(url).path) or "download"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in base)[:120]
    return f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{safe}"


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class DownloadStage(ProcessingStage):
    """Downloads every URL of a ``UrlGroupTask`` into ``download_dir``.

    ``retries`` further attempts per URL follow the first, with exponential backoff and
    jitter (or the server's ``Retry-After``), on connection errors, timeouts, 408, 429 and
    5xx. Other HTTP errors fail at once. A URL that still fails turns its task into a
    ``FailedTask`` carrying the last error. A 503 or 429 makes every download worker of the
    node back off, and ``max_requests_per_second`` caps the node's request rate
    (``politeness``).
    """

    name = "download"
    # The workers wait on the network and count no CPU: the node's slots cap them. With a quarter
    # CPU each, an element of one CPU never read a file: two of them held half of it, and Ray
    # Data's reservation left the reader, which takes a whole CPU, nothing to run on.
    resources = Resources(cpus=0.0)
    # How hard and how long to try changes no output byte: not part of the run contract.
    pinned = ()
    session = PerProcess(lambda stage: requests.Session(), key=lambda stage: stage.download_dir)
    node_politeness = PerProcess(lambda stage: NodePoliteness(state_file(stage.download_dir),
                                                              stage.max_requests_per_second),
                                 key=lambda stage: (stage.download_dir, stage.max_requests_per_second))

    def __init__(
        self,
        download_dir: str | os.PathLike,
        *,
        workers_per_node: float = DOWNLOAD_WORKERS_PER_NODE,
        retries: int = DOWNLOAD_RETRIES,
        connect_timeout_s: float = DOWNLOAD_CONNECT_TIMEOUT_S,
        read_timeout_s: float = DOWNLOAD_READ_TIMEOUT_S,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        hard_cap: bool = True,
        bound_backlog: bool = True,
        max_requests_per_second: float | None = None,
    ):
        if retries < 0:
            raise ConfigError(f"download retries must be >= 0, got {retries}")
        self.download_dir = Path(download_dir)
        self.retries = retries
        self.timeout = (connect_timeout_s, read_timeout_s)
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        if max_requests_per_second is not None and max_requests_per_second <= 0:
            raise ConfigError(f"max requests per second must be above 0, got {max_requests_per_second}")
        self.max_requests_per_second = max_requests_per_second
        self.ray_stage_spec = {
            "is_actor_stage": True,
            # Ray Data collects finished tasks about every 0.1 s (it waits for all of them with that
            # timeout); two queued inputs keep a worker busy across such a tick even for small files,
            # at the cost of at most two queued files per worker at the end of a run.
            "max_tasks_in_flight_per_actor": 3,
            "num_workers_per_node": workers_per_node,
            "bound_backlog": bound_backlog,
            **({"per_node_slot": DOWNLOAD_SLOT} if hard_cap else {}),
        }
        super().__init__()

    def setup(self) -> None:
        """One session per worker, so consecutive files reuse the connection (and its TLS)."""
        self.session

    def output_bytes(self, task: Task) -> int | None:
        """The listed sizes of the task's files (an object prefix's listing, a URL list's
        ``size`` fields); None when one is not known (a crawl's paths list has none)."""
        sizes = [task.expected.get(url, {}).get("size") for url in getattr(task, "urls", ())]
        return sum(int(size) for size in sizes) if sizes and None not in sizes else None

    def process(self, task: UrlGroupTask) -> Task:
        self.download_dir.mkdir(parents=True, exist_ok=True)
        files = []
        for url in task.urls:
            try:
                files.append(str(self.fetch(url, task.expected.get(url, {}))))
            except DownloadError as exc:
                return FailedTask(task.task_id, dict(task.metadata), reason=f"{url}: {exc}", stage=self.stage_name)
        return FileGroupTask(task.task_id, {**task.metadata, "urls": list(task.urls)}, files=files, root=str(self.download_dir))

    def fetch(self, url: str, expected: dict[str, Any]) -> Path:
        final = self.download_dir / local_name(url)
        if final.exists() and self._matches(final, expected):
            logger.info("%s: already downloaded as %s", url, final)
            return final
        part = final.with_name(final.name + ".part")
        last: DownloadError | None = None
        remote = not url.startswith("file://")
        for attempt in range(self.retries + 1):
            if attempt:
                delay = last.retry_after if last and last.retry_after is not None else min(
                    self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1)
                ) * random.uniform(0.5, 1.5)
                if remote and last is not None and last.status in THROTTLING_STATUS:
                    self.node_politeness.slow_down(delay)  # the wait happens in take_turn, for everyone
                else:
                    time.sleep(delay)
            if remote:
                self.node_politeness.take_turn()
            try:
                self._fetch_once(url, part)
                if not self._matches(part, expected):
                    part.unlink(missing_ok=True)
                    raise DownloadError(f"content does not match the expected {', '.join(sorted(expected))}", True)
                os.replace(part, final)
                fsync_directory(final.parent)
                return final
            except DownloadError as exc:
                last = exc
                logger.warning("%s: attempt %d of %d failed: %s", url, attempt + 1, self.retries + 1, exc)
                if not exc.retryable:
                    break
        assert last is not None
        raise DownloadError(f"{last} (after {attempt + 1} attempt(s))", False)

    @staticmethod
    def _matches(path: Path, expected: dict[str, Any]) -> bool:
        if "size" in expected and path.stat().st_size != int(expected["size"]):
            return False
        return "sha256" not in expected or _sha256_of(path) == str(expected["sha256"]).lower()

    def _fetch_once(self, url: str, part: Path) -> None:
        if is_s3(url):
            try:
                download(url, part)
            except StoreError as exc:
                raise DownloadError(str(exc), exc.retryable, status=503 if exc.throttled else None) from None
            return
        if url.startswith("file://"):
            source = urllib.parse.unquote(urllib.parse.urlparse(url).path)
            try:
                with open(source, "rb") as src, open(part, "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
                    os.fsync(dst.fileno())
            except FileNotFoundError:
                raise DownloadError(f"no such file {source}", False) from None
            except OSError as exc:
                raise DownloadError(f"cannot copy {source}: {exc.strerror}", True) from None
            return
        have = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with self.session.get(url, headers=headers, stream=True, timeout=self.timeout) as response:
                if response.status_code == 416 and have:
                    part.unlink(missing_ok=True)
                    raise DownloadError("server refused to resume (416); restarting", True, 0.0)
                if response.status_code >= 400:
                    raise DownloadError(
                        f"HTTP {response.status_code} {response.reason}",
                        response.status_code in RETRYABLE_STATUS,
                        _retry_after_seconds(response.headers.get("Retry-After")),
                        response.status_code,
                    )
                resumed = response.status_code == 206 and have > 0
                if have and not resumed:
                    logger.info("%s: server does not resume; restarting from byte 0", url)
                expected_length = response.headers.get("Content-Length")
                written = 0
                with open(part, "ab" if resumed else "wb") as handle:
                    for chunk in response.iter_content(NETWORK_CHUNK):
                        handle.write(chunk)
                        written += len(chunk)
                    handle.flush()
                    os.fsync(handle.fileno())
                if expected_length is not None and written != int(expected_length):
                    raise DownloadError(f"connection closed after {written} of {expected_length} bytes", True)
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            raise DownloadError(f"{type(exc).__name__}: {exc}", True) from None

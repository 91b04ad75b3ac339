"""Objects in an S3 store (``s3://bucket/key``), read through pyarrow's own S3 filesystem.

pyarrow's rather than fsspec/s3fs: it is already the library every reader and writer here
goes through, it needs no new dependency, and its reads are C++ streams that never pass
through the interpreter. It does not read the endpoint variables the AWS SDKs read, so they
are read here: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL`` (a site's own store, MinIO,
Ceph). Credentials come from the AWS SDK's standard chain (the ``AWS_*`` variables, the
shared files, an instance's role); they are never taken as options, so they are never
logged nor pinned in ``run.json``; the elements get them from the submitting shell's environment.

Everything is built from a Mapping (the environment by default), so it is tested without
touching ``os.environ``.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from ..core.errors import ConfigError

T = TypeVar("T")

SCHEME = "s3://"
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
STORE_ATTEMPTS = 6  # tries of a read, a listing or a write; a crawl download's default too (stages.defaults)
CHUNK = 16 << 20  # one ranged GET per 16 MiB: a store charges, and a Python server spends, per request
# What the AWS SDK reports for a store that is shedding load (503 and 429, however it names them):
# back off, for the whole node.
_THROTTLED = re.compile(r"SLOW_DOWN|SlowDown|SERVICE_UNAVAILABLE|ServiceUnavailable|THROTTL|Throttl|REQUEST_LIMIT|"
                        r"HTTP status (503|429)")
_REFUSED = re.compile(r"ACCESS_DENIED|INVALID_ACCESS_KEY_ID|SIGNATURE_DOES_NOT_MATCH|InvalidAccessKeyId|"
                      r"SignatureDoesNotMatch|AccessDenied|HTTP status 403")
_NO_BUCKET = re.compile(r"NO_SUCH_BUCKET|NoSuchBucket")
# The SDK's own words for a request that never got an answer (curl's, after "Details:").
_NETWORK_DETAIL = re.compile(r"Details: ([^\n]*)")


def is_s3(location: str | os.PathLike) -> bool:
    return str(location).startswith(SCHEME)


@dataclass(frozen=True)
class S3Url:
    """``s3://bucket/key``: ``key`` may be empty (the bucket) or a prefix."""

    bucket: str
    key: str = ""

    @classmethod
    def parse(cls, url: str) -> S3Url:
        if not is_s3(url):
            raise ConfigError(f"{url!r} is not an s3:// URL")
        bucket, _, key = url[len(SCHEME):].partition("/")
        if not bucket:
            raise ConfigError(f"{url!r} names no bucket (s3://bucket/prefix)")
        return cls(bucket, key.strip("/"))

    @property
    def path(self) -> str:
        """As pyarrow's S3 filesystem names it: ``bucket/key``."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def join(self, relative: str) -> str:
        return f"{SCHEME}{self.path}/{relative}"

    def __str__(self) -> str:
        return SCHEME + self.path


@dataclass(frozen=True)
class StoreSettings:
    """Where the store is (None: AWS itself) and its region, as the AWS SDKs read them."""

    endpoint: str | None = None
    scheme: str = "https"
    region: str = "us-east-1"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StoreSettings:
        url = next((env[name] for name in ENDPOINT_VARIABLES if env.get(name)), None)
        region = next((env[name] for name in REGION_VARIABLES if env.get(name)), "us-east-1")
        if url is None:
            return cls(region=region)
        scheme, separator, rest = url.partition("://")
        if not separator or scheme not in ("http", "https") or not rest.strip("/"):
            name = next(name for name in ENDPOINT_VARIABLES if env.get(name))
            raise ConfigError(f"{name}={url!r} is not an http:// or https:// URL of an S3 endpoint")
        return cls(rest.strip("/"), scheme, region)


class StoreError(Exception):
    """A store's refusal, with whether trying again may help and whether it is throttling."""

    def __init__(self, message: str, retryable: bool, throttled: bool = False):
        super().__init__(message)
        self.retryable, self.throttled = retryable, throttled


def retrying(call: Callable[[], T], what: str, attempts: int = STORE_ATTEMPTS) -> T:
    """``call()``, tried ``attempts`` times in all while the store answers with something
    worth trying again (throttling, a dropped connection), with the crawl downloads' backoff
    (0.5 s doubling, at most 30 s, jittered); then its ``StoreError`` about ``what``."""
    for attempt in range(attempts):
        try:
            return call()
        except (OSError, StoreError) as exc:
            error = exc if isinstance(exc, StoreError) else store_error(exc, what)
            if not error.retryable or attempt + 1 == attempts:
                raise error from None
        time.sleep(min(30.0, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")


def store_error(exc: BaseException, what: str) -> StoreError:
    """One line for ``exc`` about ``what`` (an URL), without the SDK's request ids."""
    text = str(exc)
    if isinstance(exc, FileNotFoundError):
        return StoreError(f"{what}: no such object", False)
    if _NO_BUCKET.search(text):
        return StoreError(f"{what}: the bucket does not exist", False)
    if _REFUSED.search(text):
        return StoreError(f"{what}: access denied: the store refused these credentials (AWS_ACCESS_KEY_ID, "
                          "AWS_PROFILE, ...) or their rights", False)
    if _THROTTLED.search(text):
        return StoreError(f"{what}: the store is throttling requests", True, throttled=True)
    return StoreError(f"{what}: {re.sub(r' ?[(]Request ID: [^)]*[)]', '', text)}", True)


@lru_cache(maxsize=4)
def _filesystem(settings: StoreSettings):
    import pyarrow.fs as pafs

    endpoint = {"endpoint_override": settings.endpoint} if settings.endpoint else {}
    return pafs.S3FileSystem(region=settings.region, scheme=settings.scheme,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=3), **endpoint)


# A store that does not answer a single request within these is unreachable, not slow: refused at once.
REACH_CONNECT_S, REACH_REQUEST_S = 2.0, 3.0


@lru_cache(maxsize=16)
def _reachable(settings: StoreSettings, bucket: str) -> None:
    import pyarrow.fs as pafs

    endpoint = {"endpoint_override": settings.endpoint} if settings.endpoint else {}
    probe = pafs.S3FileSystem(region=settings.region, scheme=settings.scheme, connect_timeout=REACH_CONNECT_S,
                              request_timeout=REACH_REQUEST_S,
                              retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1), **endpoint)
    try:
        probe.get_file_info(bucket)
    except OSError as exc:
        text = str(exc)
        if _NO_BUCKET.search(text) or _REFUSED.search(text) or _THROTTLED.search(text):
            return  # it answered: the callers say what it answered
        where = f"{settings.scheme}://{settings.endpoint}" if settings.endpoint else "AWS S3 (no AWS_ENDPOINT_URL set)"
        detail = _NETWORK_DETAIL.search(text)
        reason = f" ({re.sub(r' after [0-9]+ ms', '', detail.group(1)).strip()})" if detail else ""
        raise ConfigError(f"cannot reach the object store at {where} for bucket {bucket!r}{reason}: check "
                          "AWS_ENDPOINT_URL and the network") from None


def ensure_reachable(urls: Iterable[str], env: Mapping[str, str] | None = None) -> None:
    """Refuse, in seconds and in one line naming the endpoint and the bucket, a store that does not
    answer at all; a store that answers is left to the calls that follow, which try again on
    transient faults. Each store and bucket is asked once per process."""
    settings = StoreSettings.from_env(os.environ if env is None else env)
    for bucket in sorted({S3Url.parse(url).bucket for url in urls if is_s3(url)}):
        _reachable(settings, bucket)


def filesystem(env: Mapping[str, str] | None = None):
    """This process's S3 filesystem for the store ``env`` names (one per store, kept)."""
    return _filesystem(StoreSettings.from_env(os.environ if env is None else env))


@dataclass(frozen=True)
class StoredObject:
    """An object under a listed prefix: its key relative to the prefix, size, modification time."""

    relative: str
    size: int
    mtime_ns: int


def list_objects(prefix: str, suffixes: tuple[str, ...], env: Mapping[str, str] | None = None) -> list[StoredObject]:
    """Every object under ``prefix`` whose name ends with one of ``suffixes``, sorted; hidden
    names (a part starting with ``.``) are skipped, as in a directory. A missing bucket or
    refused credentials are a ``ConfigError``: the run cannot start."""
    import pyarrow.fs as pafs

    url = S3Url.parse(prefix)
    ensure_reachable([prefix], env)
    store = filesystem(env)
    try:
        bucket = retrying(lambda: store.get_file_info(url.bucket), f"input {url}")
        if bucket.type == pafs.FileType.NotFound:
            raise ConfigError(f"input {url}: the bucket {url.bucket!r} does not exist")
        selector = pafs.FileSelector(url.path, recursive=True, allow_not_found=True)
        infos = retrying(lambda: store.get_file_info(selector), f"input {url}")
    except StoreError as exc:
        raise ConfigError(exc.args[0]) from None
    found = []
    for info in infos:
        relative = info.path[len(url.path):].lstrip("/")
        if info.type != pafs.FileType.File or not relative.endswith(suffixes):
            continue
        if any(part.startswith(".") for part in relative.split("/")):
            continue
        found.append(StoredObject(relative, info.size, info.mtime_ns or 0))
    return sorted(found, key=lambda item: item.relative)


def object_states(urls: Iterable[str], env: Mapping[str, str] | None = None) -> dict[str, tuple[int, int] | None]:
    """Size and modification time of each object now (None: gone), to compare with a listing."""
    import pyarrow.fs as pafs

    urls = list(urls)
    try:
        infos = filesystem(env).get_file_info([S3Url.parse(url).path for url in urls])
    except OSError as exc:
        raise ConfigError(store_error(exc, "cannot check the input objects").args[0]) from None
    return {url: (info.size, info.mtime_ns or 0) if info.type == pafs.FileType.File else None
            for url, info in zip(urls, infos)}


def check_buckets(urls: Iterable[str], env: Mapping[str, str] | None = None) -> None:
    """Refuse, before any work, URLs whose bucket does not exist or is closed to these credentials."""
    import pyarrow.fs as pafs

    urls = list(urls)
    ensure_reachable(urls, env)
    store = None
    for bucket in sorted({S3Url.parse(url).bucket for url in urls if is_s3(url)}):
        store = store or filesystem(env)
        try:
            info = store.get_file_info(bucket)
        except OSError as exc:
            raise ConfigError(store_error(exc, f"{SCHEME}{bucket}").args[0]) from None
        if info.type == pafs.FileType.NotFound:
            raise ConfigError(f"{SCHEME}{bucket}: the bucket does not exist")


def download(url: str, part: Path, env: Mapping[str, str] | None = None) -> None:
    """``url`` into ``part``, continuing after the bytes ``part`` already holds (a ranged read),
    synced. Raises ``StoreError``."""
    have = part.stat().st_size if part.exists() else 0
    try:
        with filesystem(env).open_input_file(S3Url.parse(url).path) as source, open(part, "ab") as target:
            if have > source.size():
                target.truncate(0)
                have = 0
            source.seek(have)
            shutil.copyfileobj(source, target, CHUNK)
            target.flush()
            os.fsync(target.fileno())
    except OSError as exc:
        raise store_error(exc, url) from None

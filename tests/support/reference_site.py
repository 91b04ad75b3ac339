"""The reference implementations' own environments, pinned, each installed with pip into a
directory of its own (never into our venv): datatrove with the word segmenters it uses,
megatron-core (with PyTorch's CPU build) to read token files as Megatron-LM does, and moto's
S3 server (its boto3 would pin versions our venv does not take).

The sites live in our cache directory (``file_digests.cache_dir``: the user's, where pip keeps
its wheels too), one per package list and Python version: a new clone finds them installed
instead of unpacking PyTorch, spaCy and moto again (about 70 s on 2 cores).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from curator_array.core.atomic import write_bytes_atomic
from curator_array.core.file_digests import cache_dir, file_digest

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
# tokenizers, xxhash, orjson: datatrove's MinHash dedup and JSONL reader need them (bench/bench_dedup.py);
# tldextract, pyahocorasick, fasteners: its URL filter.
PACKAGES = {
    "reference-site": ("datatrove==0.10.1", "spacy==3.8.18", "sudachipy==0.7.0", "sudachidict-core==20261015",
                       "jieba==0.42.1", "tokenizers==0.23.3", "xxhash==3.5.0", "orjson==3.13.0",
                       "tldextract==5.4.0", "pyahocorasick==2.3.1", "fasteners==0.20"),
    # torch 2.13.0's CPU build is a file on this machine kind's disk, which pip takes.
    "megatron-site": ("torch==2.13.0", "megatron-core==0.16.1"),
    # moto's standalone S3 server, run as its own process (tests.support.s3_server).
    "moto-site": ("moto[s3,server]==5.2.5",),
    # The Unicode word breaks DCLM's repetition rules read words with.
    "uniseg-site": ("uniseg==0.10.1",),
}
SITES = (cache_dir() or CACHE) / "reference-sites"


def site_dir(name: str) -> Path:
    """Where the site of ``name`` is installed: its package list and Python version name it."""
    key = hashlib.sha256(f"{sys.version_info[:2]} {PACKAGES[name]}".encode()).hexdigest()[:12]
    return SITES / f"{name}-{key}"


SITE = site_dir("reference-site")


def ensure_reference_site(name: str = "reference-site") -> Path:
    """The site directory, installed once per package list; RuntimeError says why it cannot be."""
    site = site_dir(name)
    marker = site / ".complete"  # the install finished (the directory's name says what it holds)
    wanted = " ".join(PACKAGES[name])
    SITES.mkdir(parents=True, exist_ok=True)
    # One installer at a time: two test workers installing into one directory delete each other's files.
    with open(SITES / f".{site.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            shutil.rmtree(site, ignore_errors=True)  # pip --target keeps packages already there
            # --no-compile: byte-compiling all of PyTorch takes longer than installing it; Python
            # compiles the few modules a test imports, once (reference_environment).
            done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target",
                                   str(site), *PACKAGES[name]], capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"cannot install the reference environment ({wanted}): {done.stderr[-800:]}")
            marker.write_text(wanted)
    return site


def reference_environment(name: str = "reference-site", path: tuple[Path, ...] = (REPO,)) -> dict[str, str]:
    """Our environment with the reference site first on the path (then ``path``: this repository,
    for ``tests.support``), and Python free to write the bytecode of what it imports from the
    site: it is installed uncompiled, and where PYTHONDONTWRITEBYTECODE is set (our CI machines)
    every process compiled its imports again (``import torch, megatron.core``: 16.6 CPU-s
    instead of 6.8; datatrove's filters and spaCy 4.1 instead of 1.8)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site_dir(name)), *map(str, path)]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


RESULTS = (cache_dir() or CACHE) / "reference-results"


def reference_output(command: list[str], env: dict[str, str], timeout: float = 600, cwd: Path | None = None,
                     reads: tuple[Path, ...] = ()) -> str:
    """What ``command`` (run in a reference environment) prints, kept per machine under the
    digest of everything it reads: the sites on its path (their names are their package lists),
    our venv's pinned versions (the lock file: it may also import trafilatura, fastText), Python, each
    argument (a file by its contents) and ``reads``, files or trees it reads besides (by their
    paths within them and contents: give relative arguments with ``cwd`` for files a test just
    wrote). The reference's decisions are a pure function of those, and computing them again
    took 15-30 s a module (datatrove's extractor and tokenizers, torch's import). A module of
    this repository that the command imports belongs in ``reads``."""
    key = hashlib.sha256()
    sites = [Path(p).name for p in env.get("PYTHONPATH", "").split(os.pathsep) if Path(p).parent == SITES]
    for part in (sys.version, *sites, file_digest(REPO / "requirements.lock")):
        key.update(f"{part}\0".encode())
    for argument in command[1:]:
        path = Path(cwd or ".", argument)
        read = f"file {file_digest(path)}" if os.path.isfile(path) else f"arg {argument}"
        key.update(f"{read}\0".encode())
    for tree in reads:
        files = sorted(p for p in ([tree] if tree.is_file() else tree.rglob("*")) if p.is_file())
        for path in files:
            key.update(f"read {path.relative_to(tree) if path != tree else path.name} {file_digest(path)}\0".encode())
    kept = RESULTS / f"{key.hexdigest()[:32]}.out"
    if kept.is_file():
        return kept.read_text(encoding="utf-8")
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(kept, done.stdout.encode("utf-8"))
    return done.stdout

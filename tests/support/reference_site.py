"""The reference filters' own environment: datatrove with the word segmenters it uses,
pinned, installed with pip into a directory of their own (never into our venv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / ".cache" / "reference-site"
# tokenizers, xxhash, orjson: datatrove's MinHash dedup and JSONL reader need them (bench/bench_dedup.py).
PACKAGES = ("datatrove==0.10.1", "spacy==3.8.18", "sudachipy==0.7.0", "sudachidict-core==20261015", "jieba==0.42.1",
            "tokenizers==0.23.3", "xxhash==3.5.0", "orjson==3.13.0")


def ensure_reference_site() -> Path:
    """The site directory, installed once per package list; RuntimeError says why it cannot be."""
    marker = SITE / ".complete"
    wanted = " ".join(PACKAGES)
    if not (marker.exists() and marker.read_text() == wanted):
        shutil.rmtree(SITE, ignore_errors=True)  # pip --target keeps packages already there
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(SITE), *PACKAGES],
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"cannot install the reference filters ({wanted}): {done.stderr[-800:]}")
        marker.write_text(wanted)
    return SITE


def reference_environment() -> dict[str, str]:
    """Our environment with the reference site first on the path (and this repository, for
    ``tests.support.reference_filters``)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(SITE), str(REPO)]))

"""Tag once, select many times: ``curator-array select`` against running ``--pipeline commoncrawl``
again, side by side in one run, on 2 cores. Prints figures, asserts nothing.

The input is real pages (``support.real_page_warcs``: the fixture's 211 HTML pages from the
web, in several languages, each WARC holding every page 36 times under URLs of its own), 8
WARCs of 7,596 pages each: 60,768 pages, 1.07 GB of WARC records (310 MiB compressed).
The run is annotated once (``--annotate``: every page kept, with what each rule decided);
then a new decision, "English only", is made two ways, the engines taking turns:

- rerun: ``run --pipeline commoncrawl --languages en`` over the WARCs (read, extract,
  identify the language, the quality rules, write), as a user without annotations must;
- select: ``select --select-from tagged/ --where "would_drop IS NULL AND language = 'en'"``,
  which reads the tagged Parquet and writes the rows chosen.

Both are whole elements (Python's start, Ray's, the run and its stop), timed from outside,
with their process tree's peak PSS. The two outputs must hold the same pages (checked, and
printed): a selection that is fast but chooses otherwise would be no answer.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, ROUNDS, in_turns, real_page_warcs, timed_tree  # noqa: E402

sys.path.insert(0, str(REPO))

FILES, COPIES = 8, 36
WORK = CACHE / "select"
SMALL = ["--num-cpus", "2", "--object-store-memory", str(300 * 2**20), "--no-progress"]
CLI = [sys.executable, "-m", "curator_array.cli"]
ENV = dict(os.environ, PYTHONPATH=str(REPO))
WHERE = "would_drop IS NULL AND language = 'en'"


def pages_of(directory: Path) -> set[str]:
    return {url for path in directory.rglob("*.parquet") if not any(p.startswith(".") for p in
                                                                   path.relative_to(directory).parts)
            for url in pq.read_table(path, columns=["url"]).column("url").to_pylist()}


def _unpacked_size(path: Path) -> int:
    size = 0
    with gzip.open(path, "rb") as stream:
        while chunk := stream.read(1 << 24):
            size += len(chunk)
    return size


def main() -> None:
    warcs, pages = real_page_warcs(FILES, COPIES)
    size = sum(path.stat().st_size for path in warcs.glob("*.warc.gz"))
    records = sum(_unpacked_size(path) for path in warcs.glob("*.warc.gz"))
    print(f"tag once, select many: {pages:,} real HTML pages in {FILES} WARCs ({records / 1e9:.2f} GB of records, "
          f"{size / 2**20:,.0f} MiB compressed), 2 cores")
    tagged = WORK / "tagged"
    shutil.rmtree(WORK, ignore_errors=True)
    began = time.perf_counter()
    subprocess.run([*CLI, "run", "--pipeline", "commoncrawl", "--input-dir", str(warcs), "--input-file-type", "warc",
                    "--output-dir", str(tagged), "--annotate", *SMALL], env=ENV, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"  annotate once (--annotate, the whole chain): {time.perf_counter() - began:.1f} s; "
          f"{len(pages_of(tagged)):,} pages tagged")
    commands = {
        "rerun": [*CLI, "run", "--pipeline", "commoncrawl", "--input-dir", str(warcs), "--input-file-type", "warc",
                  "--languages", "en", "--output-dir", str(WORK / "rerun"), *SMALL],
        "select": [*CLI, "select", "--select-from", str(tagged), "--where", WHERE, "--output-file-type", "parquet",
                   "--output-dir", str(WORK / "select"), *SMALL],
    }

    def run(name: str) -> tuple[float, float]:
        shutil.rmtree(WORK / name, ignore_errors=True)  # every round starts from nothing
        return timed_tree(commands[name], ENV)

    turns = in_turns({name: partial(run, name) for name in commands})
    rerun, select = turns["rerun"], turns["select"]
    same = pages_of(WORK / "rerun") == pages_of(WORK / "select")
    print(f"  a new decision (English only), medians of {ROUNDS} rounds in turn:")
    print(f"    rerun commoncrawl --languages en: {rerun.median:.1f} s ({rerun} s, peak {rerun.peak:,.0f} MiB)")
    print(f"    select --where \"{WHERE}\": {select.median:.1f} s ({select} s, peak {select.peak:,.0f} MiB)")
    print(f"    select is {rerun.median / select.median:.1f}x faster; both keep the same "
          f"{len(pages_of(WORK / 'select')):,} pages: {same}")


if __name__ == "__main__":
    main()

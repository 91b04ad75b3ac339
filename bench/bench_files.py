"""Files a run leaves and file-system metadata calls it makes, per 10,000 input pages, on WARCs
of a crawl's size: ``--pipeline commoncrawl --keep-removed`` now, side by side with the
package at two earlier commits, in one run.

The input is 2 WARCs of over 20,000 real pages each (``support.real_page_warcs``: Debian's
documentation, 100 copies of each of 211 pages under URLs of their own), so a WARC streams as about 83
parts of 256 records, as a Common Crawl WARC streams as 120 to 180. Each engine runs the same
command once, under ``strace -f`` (every process of the run: the driver, Ray's workers), and
counts the calls that name a path under the run's output or checkpoint directory (open,
stat, rename, mkdir, unlink) and every fsync of the tree (an fsync names no path). datatrove
runs its nearest pipeline (``DATATROVE``) on the same files, its logging dir (completions,
stats, logs) counted as its checkpoint. Imports and
Ray's own session files are not the run's storage load, so they are not counted.

``WARC_COUNTS=1,2,16`` runs every engine at each count and prints, beside, what one more WARC
costs per 10,000 of its pages between two counts: the share that grows with a snapshot,
without what a shard pays once (its run records, listing, manifest). datatrove gets a task
per WARC at every count, as ours: a task is what either redoes after a kill.
``ENGINES=now,datatrove`` picks engines by their key; ``COPIES`` sets a WARC's size (each of
the 211 pages this many times). Prints figures; asserts nothing.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, baseline_tree, datatrove_fineweb_env, real_page_warcs  # noqa: E402

sys.path.insert(0, str(REPO))

ENGINES = {
    "now": None,
    "datatrove 0.10.1 (a file per task and writer)": "datatrove",
    "2a6aa7f (a file per part, none for an empty one)": "2a6aa7f",
    "3571c4c (a file per part)": "3571c4c",
}
COPIES = int(os.environ.get("COPIES", "100"))  # a WARC holds each of the 211 real pages this many times
WARC_COUNTS = tuple(int(n) for n in os.environ.get("WARC_COUNTS", "2").split(","))
CHOSEN = os.environ.get("ENGINES")
CALLS = ("openat", "open", "creat", "stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
         "rename", "renameat", "renameat2", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "fsync", "fdatasync")
KINDS = {"open": ("openat", "open", "creat"), "stat": ("stat", "lstat", "newfstatat", "statx", "access", "faccessat",
                                                      "faccessat2"),
         "rename": ("rename", "renameat", "renameat2"), "mkdir": ("mkdir", "mkdirat"),
         "unlink": ("unlink", "unlinkat", "rmdir"), "fsync": ("fsync", "fdatasync")}
LINE = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((.*)")


# datatrove's nearest pipeline: its WARC reader, Resiliparse's main text in process (what ours
# extracts with; datatrove's own Trafilatura would only take longer, not touch other files), the same four
# quality filters each with an exclusion writer (--keep-removed), a Parquet writer; a task per WARC.
DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.extractors.base import BaseExtractor
from datatrove.pipeline.filters import C4QualityFilter, FineWebQualityFilter, GopherQualityFilter, \\
    GopherRepetitionFilter
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter, ParquetWriter


class Resiliparse(BaseExtractor):
    name = "resiliparse"

    def __init__(self):
        super().__init__(timeout=10)

    def extract(self, text):
        from resiliparse.extract.html2text import extract_plain_text
        return extract_plain_text(text, main_content=True)

    def run(self, data, rank=0, world_size=1):  # in process: the sandbox's fork hangs under -c
        for doc in data:
            doc.text = self.extract(doc.text)
            if doc.text:
                yield doc


source, output, removed, logs, warcs = sys.argv[1:6]
steps = [WarcReader(source, glob_pattern="*.warc.gz"), Resiliparse()]
for name, step in (("gopher_repetition", GopherRepetitionFilter), ("gopher_quality", GopherQualityFilter),
                   ("c4_quality", C4QualityFilter), ("fineweb_quality", FineWebQualityFilter)):
    steps.append(step(exclusion_writer=JsonlWriter(f"{removed}/{name}")))
steps.append(ParquetWriter(output))
LocalPipelineExecutor(steps, tasks=int(warcs), workers=2, logging_dir=logs).run()
"""


def command(source: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "curator_array.cli", "run", "--pipeline", "commoncrawl", "--input-dir", str(source),
            "--input-file-type", "warc", "--output-dir", str(output), "--keep-removed", "--no-progress"]


def calls_under(log: Path, roots: tuple[str, ...]) -> collections.Counter:
    """Metadata calls in an ``strace -f`` log, by kind: those naming a path under ``roots``, and every fsync."""
    counted: collections.Counter = collections.Counter()
    kind_of = {call: kind for kind, calls in KINDS.items() for call in calls}
    for line in log.read_text(errors="replace").splitlines():
        match = LINE.match(line)
        if not match or match.group(1) not in kind_of:
            continue
        name, arguments = match.groups()
        if kind_of[name] == "fsync" or any(f'"{root}' in arguments for root in roots):
            counted[kind_of[name]] += 1
    return counted


def files_under(directory: Path) -> tuple[int, int]:
    """(files of the output, of which under .removed/), checkpoint left out."""
    outputs = [p for p in directory.rglob("*") if p.is_file() and ".nemo_curator_metadata" not in p.parts
               and ".downloads" not in p.parts]
    return len(outputs), sum(1 for p in outputs if ".removed" in p.parts)


def run_engine(label: str, commit: str | None, source: Path, runs: Path) -> tuple[int, int, int, collections.Counter,
                                                                                float]:
    """One engine's run under strace: (files, removed files, checkpoint files, calls by kind, wall s)."""
    output = runs / (commit or "now")
    log = runs / f"{commit or 'now'}.strace"
    env, cwd = None, REPO
    if commit == "datatrove":
        argv, env = [sys.executable, "-c", DATATROVE, str(source), str(output), str(output / ".removed"),
                     str(output / "logs"), str(len(list(source.glob("*.warc.gz"))))], \
            datatrove_fineweb_env(runs / "datatrove-work")
    else:
        argv = command(source, output)
    if commit and commit != "datatrove":
        tree = baseline_tree(commit)  # a run puts its working directory first on the workers' path
        env, cwd = dict(os.environ, PYTHONPATH=str(tree)), tree
    began = time.perf_counter()
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=" + ",".join(CALLS), "-o", str(log), *argv], cwd=cwd,
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    files, removed = files_under(output)
    records = output / ("logs" if commit == "datatrove" else ".nemo_curator_metadata")
    checkpoint = sum(1 for p in records.rglob("*") if p.is_file())
    if commit == "datatrove":
        files -= checkpoint
    counted = calls_under(log, (str(output),))
    log.unlink()
    return files, removed, checkpoint, counted, wall


def main() -> None:
    if shutil.which("strace") is None:
        sys.exit("bench_files needs strace (apt-get install strace)")
    engines = {label: commit for label, commit in ENGINES.items() if not CHOSEN or (commit or "now") in CHOSEN}
    totals: dict[tuple[str, int], tuple[int, int]] = {}  # (engine, WARCs) → (calls, pages)
    for warcs in WARC_COUNTS:
        source, pages = real_page_warcs(warcs, COPIES)
        runs = CACHE / "files_runs"
        shutil.rmtree(runs, ignore_errors=True)
        runs.mkdir(parents=True)
        print(f"{warcs} WARC(s) of {pages // warcs:,} real pages each ({pages:,} pages, "
              f"{sum(p.stat().st_size for p in source.glob('*.warc.gz')) / 1e6:,.0f} MB), --pipeline commoncrawl "
              "--keep-removed; per 10,000 input pages:")
        print(f"  {'engine':52s} {'files':>7s} {'removed':>8s} {'ckpt':>6s} {'open':>6s} {'stat':>6s} {'rename':>7s} "
              f"{'mkdir':>6s} {'unlink':>7s} {'fsync':>6s} {'all':>7s} {'wall s':>7s}")
        for label, commit in engines.items():
            files, removed, checkpoint, counted, wall = run_engine(label, commit, source, runs)
            per = 10_000 / pages
            totals[label, warcs] = sum(counted.values()), pages
            print(f"  {label:52s} {files * per:7.1f} {removed * per:8.1f} {checkpoint * per:6.1f} "
                  + " ".join(f"{counted[kind] * per:{width}.0f}" for kind, width in
                             zip(KINDS, (6, 6, 7, 6, 7, 6)))
                  + f" {sum(counted.values()) * per:7.0f} {wall:7.1f}")
    counts = sorted(WARC_COUNTS)
    for low, high in zip(counts, counts[1:]):
        print(f"one more WARC, per 10,000 of its pages ({low} → {high} WARCs), and what a run pays once:")
        for label in engines:
            (calls_low, pages_low), (calls_high, pages_high) = totals[label, low], totals[label, high]
            marginal = (calls_high - calls_low) / (pages_high - pages_low)
            print(f"  {label:52s} {marginal * 10_000:7.1f} calls ({marginal * pages_high / high:5.1f} a WARC); "
                  f"once {calls_low - marginal * pages_low:7.0f}")


if __name__ == "__main__":
    main()

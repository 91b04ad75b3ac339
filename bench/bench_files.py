"""Files a run leaves and file-system metadata calls it makes, per 10,000 input pages, on WARCs
of a crawl's size: ``--pipeline commoncrawl --keep-removed`` now, side by side with the
package at two earlier commits, in one run.

The input is 2 WARCs of over 20,000 real pages each (``support.real_page_warcs``: Debian's
documentation, 100 copies of each of 211 pages under URLs of their own), so a WARC streams as about 83
parts of 256 records, as a Common Crawl WARC streams as 120 to 180. Each engine runs the same
command once, under ``strace -f`` (every process of the run: the driver, Ray's workers), and
counts the calls that name a path under the run's output or checkpoint directory (open,
stat, rename, mkdir, unlink) and every fsync of the tree (an fsync names no path). Imports and
Ray's own session files are not the run's storage load, so they are not counted. Prints
figures; asserts nothing.
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
from support import CACHE, REPO, baseline_tree, real_page_warcs  # noqa: E402

sys.path.insert(0, str(REPO))

ENGINES = {
    "now": None,
    "2a6aa7f (a file per part, none for an empty one)": "2a6aa7f",
    "3571c4c (a file per part)": "3571c4c",
}
WARCS, COPIES = 2, 100
CALLS = ("openat", "open", "creat", "stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
         "rename", "renameat", "renameat2", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "fsync", "fdatasync")
KINDS = {"open": ("openat", "open", "creat"), "stat": ("stat", "lstat", "newfstatat", "statx", "access", "faccessat",
                                                      "faccessat2"),
         "rename": ("rename", "renameat", "renameat2"), "mkdir": ("mkdir", "mkdirat"),
         "unlink": ("unlink", "unlinkat", "rmdir"), "fsync": ("fsync", "fdatasync")}
LINE = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((.*)")


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


def main() -> None:
    if shutil.which("strace") is None:
        sys.exit("bench_files needs strace (apt-get install strace)")
    source, pages = real_page_warcs(WARCS, COPIES)
    runs = CACHE / "files_runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    print(f"{WARCS} WARCs of {pages // WARCS:,} real pages each ({pages:,} pages, "
          f"{sum(p.stat().st_size for p in source.glob('*.warc.gz')) / 1e6:,.0f} MB), --pipeline commoncrawl "
          "--keep-removed; per 10,000 input pages:")
    print(f"  {'engine':52s} {'files':>7s} {'removed':>8s} {'ckpt':>6s} {'open':>6s} {'stat':>6s} {'rename':>7s} "
          f"{'mkdir':>6s} {'unlink':>7s} {'fsync':>6s} {'all':>7s} {'wall s':>7s}")
    for label, commit in ENGINES.items():
        output = runs / (commit or "now")
        log = runs / f"{commit or 'now'}.strace"
        env, cwd = None, REPO
        if commit:
            tree = baseline_tree(commit)  # a run puts its working directory first on the workers' path
            env, cwd = dict(os.environ, PYTHONPATH=str(tree)), tree
        began = time.perf_counter()
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=" + ",".join(CALLS), "-o", str(log),
                        *command(source, output)], cwd=cwd, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - began
        files, removed = files_under(output)
        checkpoint = sum(1 for p in (output / ".nemo_curator_metadata").rglob("*") if p.is_file())
        counted = calls_under(log, (str(output),))
        per = 10_000 / pages
        print(f"  {label:52s} {files * per:7.1f} {removed * per:8.1f} {checkpoint * per:6.1f} "
              + " ".join(f"{counted[kind] * per:{width}.0f}" for kind, width in
                         zip(KINDS, (6, 6, 7, 6, 7, 6)))
              + f" {sum(counted.values()) * per:7.0f} {wall:7.1f}")
        log.unlink()


if __name__ == "__main__":
    main()

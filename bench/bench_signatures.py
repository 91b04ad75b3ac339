"""The signatures element on one core and on two, against a bare loop of the fastest MinHash
on PyPI (rensa's ``RMinHash``, in Rust) on one and on two, on two corpora of different shape.

``synthetic``: ``bench_dedup``'s 60,856 documents (100 to 250 ASCII words of a 20,000-word
vocabulary each, 10% planted copies); ``prose``: 60,856 documents of real European prose
(``prose_corpus``: 120 to 400 words in six languages with accents, 10% planted copies);
``pages``: 200 MB of whole pages in 25 languages, CJK included, of long-tailed length
(``real_text``: a median of 2,000 characters, a tail past 100,000); ``prose-small``: the
prose in 1,015 files of 60 documents; ``cjk``: 20,000 Japanese and Chinese documents with
their ``language``, whose words both sides split with SudachiPy and jieba.
Each is curated once into one shard. Ours is the whole element as a site runs it
(``curator-array run --phase signatures --force``, process start included) with
``--num-cpus 1`` and ``2``; the bare loop reads the same curated JSONL, normalises as we do
(lower case, numbers as 0, punctuation and symbols as spaces, accents removed), makes the
same word 5-grams and feeds them to ``RMinHash(num_perm=112)`` in a ``Pool`` of 1 and 2.
Engines take turns, 3 rounds, medians; prints documents/s, documents/s per core and the
ratios. rensa is installed into ``.cache/bench-rensa``, never into the venv. Asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("DEDUP_DOCS", "60856")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_dedup  # noqa: E402
import prose_corpus  # noqa: E402
import real_text  # noqa: E402
from rensa_loop import bare, ensure_rensa  # noqa: E402
from support import CACHE  # noqa: E402

ROUNDS = 3


def ours(corpus: Path, out: Path, cpus: int) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(corpus),
                    "--output-dir", str(out), "--num-cpus", str(cpus), "--no-progress", "--dedup", "fuzzy",
                    "--phase", "signatures", "--force"], check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> None:
    ensure_rensa()
    bench_dedup.make_corpus()
    pages = CACHE / "signatures-pages"
    real_text.write_shard(pages, 24, 200_000_000)
    corpora = {"synthetic": bench_dedup.CORPUS, "prose": prose_corpus.make(), "pages": pages,
               "prose-small": prose_corpus.make_small(), "cjk": prose_corpus.make_cjk()}
    for name in os.environ.get("CORPORA", ",".join(corpora)).split(","):
        print(f"\n## {name}")
        measure(corpora[name], CACHE / f"signatures-work-{name}")


def measure(corpus: Path, work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    out = work / "out"
    subprocess.run([sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(corpus),
                    "--output-dir", str(out), "--num-cpus", "2", "--no-progress", "--dedup", "fuzzy",
                    "--phase", "curation"], check=True, capture_output=True)
    files = sorted(str(p) for p in (out / ".curated").glob("*.jsonl"))
    documents = sum(1 for path in files for _ in open(path))
    engines = {"ours, 1 CPU": lambda: ours(corpus, out, 1), "ours, 2 CPUs": lambda: ours(corpus, out, 2),
               "rensa loop, Pool(1)": lambda: bare(files, 1), "rensa loop, Pool(2)": lambda: bare(files, 2)}
    walls: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(ROUNDS):
        for name, engine in engines.items():
            walls[name].append(engine())
    print(f"{documents:,} documents in {len(files)} curated files, {os.cpu_count()} CPUs here")
    print("| engine | median wall | rounds | documents/s | per core |")
    print("|---|---|---|---|---|")
    rates = {}
    for name, values in walls.items():
        cores = 2 if "2" in name else 1
        rates[name] = documents / statistics.median(values) / cores
        print(f"| {name} | {statistics.median(values):.1f} s | {min(values):.1f}–{max(values):.1f} s "
              f"| {documents / statistics.median(values):,.0f} | {rates[name]:,.0f} |")
    print(f"ours 2 CPUs / 1 CPU: {statistics.median(walls['ours, 1 CPU']) / statistics.median(walls['ours, 2 CPUs']):.2f}x; "
          f"per core, ours / rensa: {rates['ours, 1 CPU'] / rates['rensa loop, Pool(1)']:.2f} (1 CPU), "
          f"{rates['ours, 2 CPUs'] / rates['rensa loop, Pool(2)']:.2f} (2 CPUs; goal >= 0.8)")


if __name__ == "__main__":
    main()

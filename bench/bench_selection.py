"""Selection by model end to end, on 2 cores, side by side in one run: ours against a bare
``Pool(2)`` loop, at 100 MB and at 1 GB of JSONL. Prints figures, asserts nothing.

Documents have the shape of a crawl's: 1,280,000 of them per GB, each two or three real
paragraphs of one language (Debian's and GNOME's manuals, ten languages), word salad (such
a text's words shuffled) or spam (a phrase repeated with a link), 70/20/10, in 16 files. The model has DCLM's shape: a
fastText bigram classifier with 2 M hash buckets and dim 100 (about 800 MB), trained here.

- ours: ``curator-array run --quality-model q=MODEL --output-file-type parquet`` (the whole
  element: Python's start, Ray's, the run and its stop), wall time from outside; its cores
  busy are the stages' CPU seconds (``status --json``) over that wall time, and ``status``'s
  own figure (process start to manifest) beside;
- bare: ``Pool(2)``, each worker loading the model once; per file: read the JSONL with
  pyarrow, join each text's lines, ``predict``, DCLM's hq probability, write Parquet (id,
  text, q).

Three rounds, the engines in turn; medians, and the host's busy core-seconds over each run
(``support.host_busy_s``): beside ours' stages' CPU, they say how much of the difference is
the work itself and how much the driver, the node and the kernel. The whole process tree's
peak PSS comes from one more run of each engine, sampled every 2 s: reading it costs the
kernel CPU, 0.015-0.025 of a core here, which the timed rounds must not lose.

A third engine is the bare loop with glibc putting its large allocations on huge pages
(``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``), as ours moves its models there after loading
(``classify.model_pages``): how much of the difference that is.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_classifier import model  # noqa: E402
from support import CACHE, PSS_SAMPLING_BUSY_S, REPO, host_busy_s, in_turns, timed_tree  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.quality_corpus import paragraphs  # noqa: E402

SIZES = [int(size) for size in os.environ.get("SELECTION_DOCS", "128000,1280000").split(",")]
FILES = 16
WORK = CACHE / "selection"
OURS = ["--num-cpus", "2", "--object-store-memory", str(300 * 2**20), "--no-progress", "--output-file-type",
        "parquet"]

HUGE_PAGES = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}

BARE = r"""
import sys
from multiprocessing import Pool
from pathlib import Path
import pyarrow as pa, pyarrow.json as pj, pyarrow.parquet as pq

def load(path):
    global MODEL
    import fasttext
    MODEL = fasttext.load_model(path)

def score(job):
    path, out = job
    table = pj.read_json(path)
    scores = []
    for content in table.column("text").to_pylist():
        labels, probabilities = MODEL.predict(" ".join(content.strip().splitlines()))
        p = float(probabilities[0])
        scores.append(p if labels[0] == "__label__hq" else 1.0 - p)
    pq.write_table(pa.table({"id": table.column("id"), "text": table.column("text"), "q": scores}), out)

corpus, model, out = sys.argv[1:]
Path(out).mkdir(parents=True, exist_ok=True)
jobs = [(str(p), str(Path(out) / (p.stem + ".parquet"))) for p in sorted(Path(corpus).glob("*.jsonl"))]
with Pool(2, initializer=load, initargs=(model,)) as pool:
    pool.map(score, jobs, chunksize=1)
"""


def documents(count: int):
    rng = random.Random(7)
    by_language: dict[str, list[str]] = {}
    for paragraph in paragraphs():
        by_language.setdefault(paragraph["language"], []).append(paragraph["text"])
    languages = sorted(by_language)
    for index in range(count):
        kind = rng.random()
        text = "\n\n".join(rng.choices(by_language[rng.choice(languages)], k=rng.randint(2, 3)))
        if 0.7 <= kind < 0.9:
            words = text.split()
            rng.shuffle(words)
            text = " ".join(words)
        elif kind >= 0.9:
            text = " ".join([f"Best {rng.choice(['deals', 'prices', 'offers'])} today! Click here"] * rng.randint(2, 8))
            text += f" http://shop{index % 97}.example/buy"
        yield {"id": f"doc-{index:08d}", "text": text}


def corpus(count: int) -> Path:
    directory = WORK / f"docs-{count}"
    if (directory / ".complete").exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    handles = [open(directory / f"part-{i:02d}.jsonl", "w", encoding="utf-8") for i in range(FILES)]
    for index, document in enumerate(documents(count)):
        handles[index % FILES].write(json.dumps(document, ensure_ascii=False) + "\n")
    for handle in handles:
        handle.close()
    (directory / ".complete").write_text("")
    return directory


def status_of(out: Path, env: dict) -> dict:
    return json.loads(subprocess.run([sys.executable, "-m", "curator_array.cli", "status", "--checkpoint-path",
                                      str(out), "--json"], capture_output=True, text=True, env=env,
                                     check=True).stdout)


def measure(count: int, classifier: Path) -> None:
    data = corpus(count)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    busy: list[tuple[float, float | None, float]] = []  # per timed round: stages CPU-s, status, wall s

    host_busy: dict[str, list[float]] = {}
    sampling = False  # the timed rounds are not; the run for the peak memory is

    def timed_counted(name: str, command: list[str], run_env: dict) -> tuple[float, float]:
        if sampling:
            return timed_tree(command, run_env, interval_s=PSS_SAMPLING_BUSY_S)
        before = host_busy_s()
        measured = timed_tree(command, run_env, interval_s=None)
        host_busy.setdefault(name, []).append(host_busy_s() - before)
        return measured

    def ours():
        out = WORK / f"ours-{count}"
        shutil.rmtree(out, ignore_errors=True)
        measured = timed_counted("ours", [sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(data),
                                          "--output-dir", str(out), *OURS, "--quality-model", f"q={classifier}"], env)
        if not sampling:
            shown = status_of(out, env)
            busy.append((sum(stage["cpu_s"] for stage in shown["stages"]), shown["cores_busy"], measured[0]))
        return measured

    def bare(name: str, extra_env: dict[str, str]):
        def run():
            out = WORK / f"bare-{count}"
            shutil.rmtree(out, ignore_errors=True)
            return timed_counted(name, [sys.executable, "-c", BARE, str(data), str(classifier), str(out)],
                                 {**env, **extra_env})
        return run

    engines = {"ours": ours, "bare Pool(2)": bare("bare Pool(2)", {}),
               "bare, huge pages": bare("bare, huge pages", HUGE_PAGES)}
    turns = in_turns(engines)
    sampling = True
    peaks = {name: engine()[1] for name, engine in engines.items()}
    size = sum(p.stat().st_size for p in data.glob("*.jsonl")) / 1e6
    print(f"\n{count:,} documents, {size:,.0f} MB of JSONL in {FILES} files; medians of "
          f"{len(turns['ours'].walls)} rounds in turn (peak: the process tree's PSS, in a run of its own)")
    for name, turn in turns.items():
        print(f"  {name:<14}{turn.median:8.1f} s  (rounds {turn} s; peak {peaks[name]:,.0f} MiB; host busy "
              f"{'/'.join(f'{b:.1f}' for b in host_busy[name])} core-s)")
    per_round = [cpu / wall for cpu, _, wall in busy]
    shown = sorted(s for _, s, _ in busy if s is not None)
    print(f"  ours' stages: {'/'.join(f'{c:.1f}' for c, _, _ in busy)} CPU-s; cores busy start to exit "
          f"{'/'.join(f'{b:.3f}' for b in per_round)}")
    print(f"  bare / ours: {turns['bare Pool(2)'].median / turns['ours'].median:.2f}x (on huge pages: "
          f"{turns['bare, huge pages'].median / turns['ours'].median:.2f}x); cores busy "
          f"{sorted(per_round)[len(per_round) // 2]:.2f} of 2 (median of the rounds: the stages' CPU-s over the "
          f"element's wall, start to exit); status says {shown[len(shown) // 2] if shown else '-'} (process start "
          f"to manifest)")


def main() -> None:
    classifier = model()
    print(f"model {classifier.name}: {classifier.stat().st_size / 2**20:,.0f} MiB")
    for count in SIZES:
        measure(count, classifier)


if __name__ == "__main__":
    main()

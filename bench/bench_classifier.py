"""Selection by model, side by side in one run on 2 cores; prints figures, asserts nothing.

1. Scoring: ``curator-array run --quality-model`` (read JSONL, score, write JSONL; Ray's
   start and stop included) against a bare ``multiprocessing.Pool(2)``: each worker loads
   the model once, reads a file with pyarrow and scores its texts with fastText's
   ``predict`` as DCLM does, and writes nothing. The same run without the model shows what
   the stage itself adds. Documents are pages of real text in ten languages (paragraphs of
   Debian's and GNOME's manuals, 4 to 30 of one language per page: 3,500 characters on
   average); the model is a bigram fastText classifier with DCLM's defaults (2 M hash
   buckets, an 800 MB file), trained here on those paragraphs. ``CLASSIFIER_DOCS``
   (default 100,000) documents, three rounds in turn.
2. The top-fraction phases at ``TOP_FRACTION_DOCS`` (default 1,000,000) documents (one
   paragraph each, scored by the same model in the curation phase, two shards): each
   phase's wall time and its elements' peak RSS (``run --phase``, the two elements of a
   shard phase at once), and the kept fraction against an exact sort of every score.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, curator, in_turns, timed_tree, wait_peak  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.quality_corpus import paragraphs, training_files  # noqa: E402

DOCS = int(os.environ.get("CLASSIFIER_DOCS", "100000"))
TOP_DOCS = int(os.environ.get("TOP_FRACTION_DOCS", "1000000"))
FILES, SHARDS = 8, 2
SMALL = ["--num-cpus", "2", "--object-store-memory", str(300 * 2**20), "--no-progress"]
WORK = CACHE / "classifier"


def model() -> Path:
    """A bigram classifier with DCLM's defaults, trained once."""
    from curator_array.classify.training import train

    path = WORK / "hq-bigram.bin"
    if not path.exists():
        positive, negative = training_files(WORK / "training")
        evaluation = train([str(positive)], [str(negative)], path)
        print(f"trained {path.name}: {path.stat().st_size / 2**20:,.0f} MiB, held-out precision "
              f"{evaluation.precision:.3f}, recall {evaluation.recall:.3f}")
    return path


def write_files(directory: Path, documents) -> Path:
    marker = directory / ".complete"
    if marker.exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    handles = [open(directory / f"part-{i}.jsonl", "w", encoding="utf-8") for i in range(FILES)]
    for index, document in enumerate(documents):
        handles[index % FILES].write(json.dumps(document, ensure_ascii=False) + "\n")
    for handle in handles:
        handle.close()
    marker.write_text("done")
    return directory


def pages(count: int):
    """Pages of 4 to 30 paragraphs of one language each."""
    rng, by_language = random.Random(5), {}
    for paragraph in paragraphs():
        by_language.setdefault(paragraph["language"], []).append(paragraph["text"])
    languages = sorted(by_language)
    for index in range(count):
        language = rng.choice(languages)
        chosen = rng.choices(by_language[language], k=rng.randint(4, 30))
        yield {"id": f"page-{index:07d}", "language": language, "text": "\n\n".join(chosen)}


def short_documents(count: int):
    pool = paragraphs()
    for index in range(count):
        paragraph = pool[index % len(pool)]
        yield {"id": f"doc-{index:07d}", "text": f"{paragraph['text']} ({index})"}


BARE = r"""
import sys, time
from multiprocessing import Pool
from pathlib import Path
import pyarrow.json as pj

def load(path):
    global MODEL
    import fasttext
    MODEL = fasttext.load_model(path)

def score(path):
    scores = []
    texts = pj.read_json(path).column("text").to_pylist()
    began = time.process_time()
    for content in texts:
        labels, probabilities = MODEL.predict(" ".join(content.strip().splitlines()))
        p = float(probabilities[0])
        scores.append(p if labels[0] == "__label__hq" else 1.0 - p)
    return time.process_time() - began

corpus, model, report = sys.argv[1:]
with Pool(2, initializer=load, initargs=(model,)) as pool:
    seconds = sum(pool.map(score, sorted(map(str, Path(corpus).glob("*.jsonl"))), chunksize=1))
Path(report).write_text(str(seconds))
"""


def scoring(corpus: Path, classifier: Path) -> None:
    work = WORK / "scoring"
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def ours(with_model: bool):
        def engine():
            out = work / ("scored" if with_model else "plain")
            shutil.rmtree(out, ignore_errors=True)
            extra = ["--quality-model", f"hq={classifier}"] if with_model else []
            return timed_tree([sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(corpus),
                               "--output-dir", str(out), *SMALL, *extra], env)
        return engine

    predict_cpu = []

    def bare():
        measured = timed_tree([sys.executable, "-c", BARE, str(corpus), str(classifier), str(work / "bare-cpu")], env)
        predict_cpu.append(float((work / "bare-cpu").read_text()))
        return measured

    turns = in_turns({"ours": ours(True), "bare": bare, "ours without the model": ours(False)})
    size = sum(p.stat().st_size for p in corpus.glob("*.jsonl")) / 2**20
    print(f"\nscoring {DOCS:,} pages ({size:,.0f} MiB of JSONL), 2 cores, medians of {len(turns['ours'].walls)} rounds "
          "(peak: the whole process tree's PSS):")
    for name, turn in turns.items():
        print(f"  {name:<26}{turn.median:8.1f} s  (rounds {turn} s; peak {turn.peak:,.0f} MiB)")
    print(f"  ours / bare Pool(2) loop: {turns['bare'].median / turns['ours'].median:.2f}x; the stage adds "
          f"{turns['ours'].median - turns['ours without the model'].median:.1f} s to the run")
    stage = json.loads(subprocess.run([sys.executable, "-m", "curator_array.cli", "status", "--checkpoint-path",
                                       str(work / "scored"), "--json"], capture_output=True, text=True, env=env,
                                      check=True).stdout)
    stage_cpu = next(t["cpu_s"] for t in stage["stages"] if t["stage"] == "quality_model")
    bare_cpu = sorted(predict_cpu)[len(predict_cpu) // 2]
    print(f"  CPU per document: the quality_model stage {stage_cpu / DOCS * 1e6:,.0f} us (its model loads included), "
          f"the bare loop's predict calls {bare_cpu / DOCS * 1e6:,.0f} us: {bare_cpu / stage_cpu:.2f}x")


def top_fraction(corpus: Path, classifier: Path) -> None:
    import numpy as np

    work = WORK / "top"
    shutil.rmtree(work, ignore_errors=True)
    common = ["run", "--input-dir", str(corpus), "--output-dir", str(work / "out"), *SMALL, "--quality-model",
              f"hq={classifier}", "--keep-top-fraction", "hq=0.1", "--quality-buckets", "20"]
    began = time.perf_counter()
    for shard in range(SHARDS):
        wait_peak(curator(work / "logs" / f"curation-{shard}.log", *common, "--phase", "curation", shard=(shard, SHARDS)))
    print(f"\ntop fraction and buckets over {TOP_DOCS:,} documents (curation with the model: "
          f"{time.perf_counter() - began:.1f} s):")
    for phase, elements in (("quality_scores", SHARDS), ("quality_cut", 1), ("quality_selection", SHARDS)):
        began = time.perf_counter()
        started = [curator(work / "logs" / f"{phase}-{i}.log", *common, "--phase", phase,
                           shard=(i, elements) if elements > 1 else None)
                   for i in range(elements)]
        peak = max(wait_peak(item) for item in started)
        print(f"  {phase:<20}{time.perf_counter() - began:7.1f} s  peak RSS {peak:,.0f} MiB ({elements} element(s))")
    out = work / "out"
    scores = np.concatenate([
        np.array([json.loads(line)["hq"] for line in path.read_text().splitlines()])
        for path in sorted((out / ".curated").glob("*.jsonl"))])
    kept = sum(1 for path in out.glob("*.jsonl") for _ in open(path))
    exact = np.sort(scores)[::-1][round(0.1 * len(scores)) - 1]
    print(f"  kept {kept:,} of {len(scores):,} ({kept / len(scores):.4%}); an exact sort keeps "
          f"{int((scores >= exact).sum()):,} ({(scores >= exact).mean():.4%})")


def main() -> None:
    classifier = model()
    if DOCS:
        scoring(write_files(WORK / f"pages-{DOCS}", pages(DOCS)), classifier)
    if TOP_DOCS:
        top_fraction(write_files(WORK / f"short-{TOP_DOCS}", short_documents(TOP_DOCS)), classifier)


if __name__ == "__main__":
    main()

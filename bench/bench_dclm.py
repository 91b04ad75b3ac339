"""``--pipeline dclm`` on 100,000 JSONL documents of real text, side by side on 2 cores.

The input is ``real_text``'s: pages of Debian's documentation in 25 languages with a url, in
DCLM-Pool's shape (id, url, text; a median of about 2,000 characters, a long tail), made once
and kept. Engines take turns:

1. ours: ``curator-array run --pipeline dclm --num-cpus 2`` (JSONL out), process start and
   Ray's included;
2. a bare ``Pool(2)`` loop of our own rule functions: each worker reads a file's lines with
   ``json.loads``, runs ``RefinedWebRules`` (the same model) on each page and writes the
   pages kept as JSONL.

Then the word splitting DCLM's repetition rules pay for on every page that reaches them: the
``uniseg`` package DCLM calls, against ours (``regex``'s Unicode word boundaries), one core,
on the English pages. Prints documents/s and ratios; asserts nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_text  # noqa: E402
from support import CACHE, REPO, in_turns  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.reference_site import ensure_reference_site, reference_environment  # noqa: E402

TARGET_BYTES = int(os.environ.get("DCLM_BYTES", 550_000_000))  # about 100,000 documents
INPUT = CACHE / f"dclm-input-{TARGET_BYTES}"
FILES = 8
ROUNDS = int(os.environ.get("ROUNDS", 2))
WORK = CACHE / "dclm-work"

_rules = None


def _load_rules() -> None:
    global _rules
    from curator_array.stages.web import dclm_rules
    from curator_array.stages.web.fasttext_language import LABEL_PREFIX, bundled_model, load_model

    model = load_model(bundled_model())

    def language(line: str) -> tuple[str, float]:
        labels, scores = model.predict(line, k=1)
        return labels[0].removeprefix(LABEL_PREFIX), float(scores[0])

    _rules = dclm_rules.RefinedWebRules(language, lambda key: False)


def _bare_file(path: str) -> int:
    kept = 0
    with open(path, encoding="utf-8") as lines, open(WORK / "bare" / Path(path).name, "w", encoding="utf-8") as out:
        for line in lines:
            page = json.loads(line)
            outcome = _rules(page.get("text"), page.get("url"))
            if outcome.dropped_by is None:
                out.write(json.dumps({**page, "text": outcome.text}, ensure_ascii=False) + "\n")
                kept += 1
    return kept


def bare() -> float:
    shutil.rmtree(WORK / "bare", ignore_errors=True)
    (WORK / "bare").mkdir(parents=True)
    began = time.perf_counter()
    with Pool(2, initializer=_load_rules) as pool:
        pool.map(_bare_file, sorted(str(p) for p in INPUT.glob("*.jsonl")), chunksize=1)
    return time.perf_counter() - began


def ours() -> float:
    out = WORK / "ours"
    shutil.rmtree(out, ignore_errors=True)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "curator_array.cli", "run", "--pipeline", "dclm", "--input-dir", str(INPUT),
                    "--input-file-type", "jsonl", "--output-file-type", "jsonl", "--output-dir", str(out),
                    "--num-cpus", "2", "--no-progress"], check=True, capture_output=True)
    return time.perf_counter() - began


WORDS = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
texts = json.load(open(sys.argv[1]))
if sys.argv[3] == "uniseg":
    from uniseg.wordbreak import words
    split = lambda text: [w for w in words(text) if w[0].isalnum()]
else:
    from curator_array.stages.web.dclm_rules import unicode_words as split
began = time.perf_counter()
count = sum(len(split(text)) for text in texts)
print(json.dumps({"seconds": time.perf_counter() - began, "words": count}))
"""


def word_splitting(documents: list[dict]) -> None:
    ensure_reference_site("uniseg-site")
    english = [d["text"] for d in documents if "python3" in d["url"] and d["text"]][:3000]
    sample = WORK / "english.json"
    sample.write_text(json.dumps(english))
    results = {}
    for engine in ("uniseg", "ours"):
        done = subprocess.run([sys.executable, "-c", WORDS, str(sample), str(REPO), engine], capture_output=True,
                              text=True, check=True, env=reference_environment("uniseg-site"))
        results[engine] = json.loads(done.stdout)
    megabytes = sum(len(t.encode()) for t in english) / 1e6
    print(f"\nword splitting for the repetition rules, {len(english):,} English pages ({megabytes:.1f} MB), one core:")
    for engine, found in results.items():
        print(f"  {engine}: {found['seconds']:.2f} s, {found['words']:,} words, {megabytes / found['seconds']:.2f} MB/s")
    print(f"  ours / uniseg: {results['uniseg']['seconds'] / results['ours']['seconds']:.1f}x faster, "
          f"same words: {results['uniseg']['words'] == results['ours']['words']}")


def main() -> None:
    documents_count = real_text.write_shard(INPUT, FILES, TARGET_BYTES)
    size = sum(p.stat().st_size for p in INPUT.glob("*.jsonl"))
    WORK.mkdir(parents=True, exist_ok=True)
    turns = in_turns({"ours, --pipeline dclm, 2 CPUs": lambda: (ours(), 0.0),
                      "bare Pool(2) loop of our rules": lambda: (bare(), 0.0)}, ROUNDS)
    print(f"{documents_count:,} documents, {size / 1e6:,.0f} MB of JSONL in {FILES} files, {os.cpu_count()} CPUs here")
    print("| engine | median wall | rounds | documents/s | MB/s |")
    print("|---|---|---|---|---|")
    for name, turn in turns.items():
        print(f"| {name} | {turn.median:.1f} s | {turn} s | {documents_count / turn.median:,.0f} "
              f"| {size / 1e6 / turn.median:.2f} |")
    ours_turns, bare_turns = turns.values()
    print(f"ours / bare loop: {bare_turns.median / ours_turns.median:.2f}x (goal >= 0.8)")
    first = INPUT / "part-000.jsonl"
    word_splitting([json.loads(line) for line in first.open(encoding="utf-8")])


if __name__ == "__main__":
    main()

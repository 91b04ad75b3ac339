"""Decontamination's speed: our stage against datatrove's filter and a bare loop, on real text.

The documents are the real multilingual shard of ``bench_pipeline`` (``real_text``: 400 MB,
about 74,000 documents of long-tailed length in 25+ languages). The eval sets are 15,000
records made of paragraphs of Python's documentation (an answer, and the paragraph before it
as the query), in five tasks; the documents are made of the same pages, so some of them
really hold eval text, as a crawl holds benchmark text.

Each engine checks every document with two worker processes (``Pool(2)``), in batches of
1,000, each worker loading its index once:

- ours: ``stages.decontaminate.Decontaminator.process`` on Arrow batches (13-grams, drop);
- bare: a plain Python loop of the same check: the same normalisation (lower case, numbers
  as 0, punctuation and symbols as spaces, accents removed), split at spaces, every n-gram
  joined and looked up in a Python set of the eval n-grams;
- datatrove: ``NGramsDecontFilter.filter`` (12-grams, its default config; spaCy's English
  tokenizer for every document), its index built by ``NGramsDecontIndexer.compute_hashes``.

It prints documents/s of each, the ratios (goals: ours ≥ 3× datatrove, ≥ 0.8× bare), the
documents each drops, and the index's build time, size and memory for the 15,000 records.
Engines take turns, ``ROUNDS`` rounds, medians. Asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_text import pages, write_shard  # noqa: E402
from support import CACHE, REPO  # noqa: E402

sys.path.insert(0, str(REPO))
EVAL_RECORDS = 15_000
TASKS = ("python_qa", "python_reading", "python_howto", "python_api", "python_faq")
ROUNDS = 3
BATCH = 1000
WORKERS = 2
DOCUMENTS = CACHE / "pipeline_real_input_48x400000000"


def eval_records() -> list[dict]:
    """15,000 answers (a paragraph of Python's docs, its first 60 words) with the paragraph
    before each as the query."""
    records = []
    for page in pages():
        if "/doc/python3" not in page["source"]:
            continue
        paragraphs = [p for p in page["paragraphs"] if len(p.split()) >= 20]
        for before, paragraph in zip(paragraphs, paragraphs[1:]):
            records.append({"text": " ".join(paragraph.split()[:60]), "query": " ".join(before.split()[-30:]),
                            "task": TASKS[len(records) % len(TASKS)]})
            if len(records) == EVAL_RECORDS:
                return records
    return records


def documents() -> tuple[list[str], list[str]]:
    write_shard(DOCUMENTS, 48, 400_000_000)
    ids, texts = [], []
    for path in sorted(DOCUMENTS.glob("*.jsonl")):
        for line in open(path, encoding="utf-8"):
            record = json.loads(line)
            ids.append(record["id"])
            texts.append(record["text"] or "")
    return ids, texts


# ours -------------------------------------------------------------------------------------

def _ours_start(stage):
    global STAGE
    STAGE = stage
    stage.setup()


def _ours_batch(batch):
    import pyarrow as pa

    from curator_array.stages.tasks import DocumentBatch

    ids, texts = batch
    done = STAGE.process(DocumentBatch(f"b{ids[0]}", table=pa.table({"id": ids, "text": texts})))
    return done.table.num_rows


# bare ---------------------------------------------------------------------------------------

def _bare_words(text: str) -> list[str]:
    import unicodedata

    import regex

    text = regex.sub(r"\p{Nd}+(?:[.,٫]\p{Nd}+)*", "0", text.lower())
    text = regex.sub(r"[\p{P}\p{S}]", " ", text)
    return regex.sub(r"\p{Mn}+", "", unicodedata.normalize("NFD", text)).split()


def _bare_index(records: list[dict], n: int) -> set[str]:
    grams = set()
    for record in records:
        words = _bare_words(record["text"])
        grams.update(" ".join(words[i:i + n]) for i in range(len(words) - n + 1)
                     if any(character.isalpha() for word in words[i:i + n] for character in word))
    return grams


def _bare_start(grams, n):
    global GRAMS, N
    GRAMS, N = grams, n


def _bare_batch(batch):
    kept = 0
    for text in batch[1]:
        words = _bare_words(text)
        kept += not any(" ".join(words[i:i + N]) in GRAMS for i in range(len(words) - N + 1))
    return kept


def pooled(start, arguments, work, batches) -> tuple[float, int]:
    began = time.perf_counter()
    with Pool(WORKERS, initializer=start, initargs=arguments) as pool:
        kept = sum(pool.map(work, batches, chunksize=1))
    return time.perf_counter() - began, kept


DATATROVE_SCRIPT = r'''
import json, sys, time, tempfile
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path
from types import SimpleNamespace
import numpy as np
from datatrove.data import Document
from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer

evals, texts_file, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = NGramsDecontConfig()
folder = Path(tempfile.mkdtemp())
began = time.perf_counter()
probe = NGramsDecontFilter(str(folder), config=config)
indexer = SimpleNamespace(config=config, tokenizer=probe.tokenizer, hash_func=probe.hash_func)
hashes = defaultdict(set)
for line in open(evals):
    record = json.loads(line)
    hashes[record["task"]].update(NGramsDecontIndexer.compute_hashes(indexer, record["text"], record.get("query", "")))
for task, found in hashes.items():
    np.array(list(found), dtype=config.hash_config.np_descr).tofile(folder / f"{task}.index.hashes")
build_s = time.perf_counter() - began
texts = json.load(open(texts_file))
batches = [texts[i:i + 1000] for i in range(0, len(texts), 1000)]

def start():
    global FILTER
    FILTER = NGramsDecontFilter(str(folder), config=config)
    FILTER.load_index_hashes()

def work(batch):
    return sum(FILTER.filter(Document(text=t, id="x")) is True for t in batch)

walls = []
for _ in range(rounds):
    t = time.perf_counter()
    with Pool(2, initializer=start) as pool:
        kept = sum(pool.map(work, batches, chunksize=1))
    walls.append(time.perf_counter() - t)
print(json.dumps({"walls": walls, "kept": kept, "build_s": build_s, "hashes": sum(map(len, hashes.values()))}))
'''


def main() -> None:
    from curator_array.decont.evalsets import EvalRecord, EvalSet
    from curator_array.decont.index import build_index
    from curator_array.decont.rules import IndexRules
    from curator_array.stages.decontaminate import Decontaminator
    from tests.support.reference_site import ensure_reference_site, reference_environment

    ensure_reference_site()
    records = eval_records()
    ids, texts = documents()
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    print(f"{len(records):,} eval records in {len(TASKS)} tasks; {len(texts):,} documents, {megabytes:,.0f} MB, "
          f"{os.cpu_count()} CPUs here, {WORKERS} workers per engine")
    work = Path(tempfile.mkdtemp(prefix="bench-decont-"))
    evalset = EvalSet(tuple(EvalRecord(r["text"], r["query"], r["task"], f"evals.jsonl:{i + 1}")
                            for i, r in enumerate(records)))
    builds = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        index = build_index(evalset, IndexRules(13))
        data = index.to_bytes()
        builds.append(time.perf_counter() - began)
    (work / "decont.index").write_bytes(data)
    import hashlib

    stage = Decontaminator(work / "decont.index", hashlib.sha256(data).hexdigest(), 13)
    bare_began = time.perf_counter()
    grams = _bare_index(records, 13)
    bare_build = time.perf_counter() - bare_began
    print(f"index of {len(records):,} records: ours {statistics.median(builds):.2f} s, {len(index.keys):,} 13-grams, "
          f"file {len(data) / 2**20:.1f} MiB, in memory {index.memory_bytes / 2**20:.1f} MiB "
          f"({index.memory_bytes / len(index.keys) * 1e6 / 2**20:.1f} MiB per million n-grams); "
          f"a Python set of the same n-grams {bare_build:.2f} s")

    batches = [(ids[i:i + BATCH], texts[i:i + BATCH]) for i in range(0, len(texts), BATCH)]
    (work / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (work / "texts.json").write_text(json.dumps(texts))
    walls: dict[str, list[float]] = {"ours": [], "bare": []}
    kept: dict[str, int] = {}
    for _ in range(ROUNDS):
        wall, kept["ours"] = pooled(_ours_start, (stage,), _ours_batch, batches)
        walls["ours"].append(wall)
        wall, kept["bare"] = pooled(_bare_start, (grams, 13), _bare_batch, batches)
        walls["bare"].append(wall)
    done = subprocess.run([sys.executable, "-c", DATATROVE_SCRIPT, str(work / "evals.jsonl"), str(work / "texts.json"),
                           "1"], env=reference_environment(), capture_output=True, text=True, check=True)
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    walls["datatrove"], kept["datatrove"] = theirs["walls"], theirs["kept"]
    rates = {name: len(texts) / statistics.median(values) for name, values in walls.items()}
    print(f"datatrove's index: {theirs['build_s']:.2f} s for {theirs['hashes']:,} 12-gram hashes")
    print("| engine | documents/s | MB/s | median wall | documents dropped |")
    print("|---|---|---|---|---|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {megabytes * rate / len(texts):.1f} | {statistics.median(walls[name]):.1f} s "
              f"| {len(texts) - kept[name]:,} |")
    print(f"ours / datatrove {rates['ours'] / rates['datatrove']:.2f}x (goal >= 3), "
          f"ours / bare {rates['ours'] / rates['bare']:.2f}x (goal >= 0.8)")


if __name__ == "__main__":
    main()

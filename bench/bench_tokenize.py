"""Tokenization for training, side by side in one run on the same documents and 2 cores:

1. curator-array's tokenize phases (`curator-array run --phase tokenize`, one element per
   shard, 2 at a time, then `--phase tokens`, which merges them into OUTPUT_DIR/tokens/),
   after a curation phase with --tokenize (timed apart: it adds each document's
   token_count, tokenizing once more),
2. datatrove 0.10.1's ``MegatronDocumentTokenizer`` on its LocalPipelineExecutor (8 tasks,
   2 workers) over the same curated files,
3. a bare loop: pyarrow reads each file, ``Tokenizer.encode_batch_fast`` encodes it (ids
   only, as our phase asks), numpy writes the same .bin/.idx bytes, in one process (the
   tokenizer's own threads use both cores): the limit, nearly all of it the tokenizer's
   own work. It runs twice: as written (glibc's allocator), and with the mimalloc our
   encoder process preloads (the same library, from the ``cmeel-mimalloc`` wheel), so the
   share of our speed that comes from the allocator is in plain view.

Same tokenizer (byte-level BPE, 32,000 tokens, trained once on the corpus), same
end-of-text token. Two sizes (``TOKENIZE_DOCS``, default 4,000 and 60,000 documents of
100-1,200 words). Prints wall times, ratios, tokens/s and peak RSS; asserts nothing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, curator, measure_snippet, wait_peak  # noqa: E402

sys.path.insert(0, str(REPO))
from curator_array.helpers.allocator import bundled_mimalloc  # noqa: E402
from tests.support.reference_site import ensure_reference_site, reference_environment  # noqa: E402
from tests.support.tokenizer import train_tokenizer  # noqa: E402

SIZES = [int(n) for n in os.environ.get("TOKENIZE_DOCS", "4000,60000").split(",")]
FILES, SHARDS, WORKERS = 8, 2, 2
SMALL = ["--num-cpus", "2", "--object-store-memory", str(300 * 2**20), "--no-progress"]
TOKENIZER = CACHE / "tokenize" / "tokenizer.json"


def words() -> list[str]:
    """A vocabulary of real words, most frequent first (the project's own docs)."""
    counts: dict[str, int] = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for word in path.read_text().split():
            word = word.strip("`*|()[],.:;\"'")
            if word.isalpha():
                counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=counts.get, reverse=True)


def make_corpus(documents: int) -> Path:
    corpus = CACHE / "tokenize" / f"corpus-{documents}"
    if (corpus / ".complete").exists():
        return corpus
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir(parents=True)
    rng, vocabulary = random.Random(11), words()
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf's law, as in prose
    handles = [open(corpus / f"part-{i}.jsonl", "w") for i in range(FILES)]
    for index in range(documents):
        sentences = []
        for _ in range(rng.randint(8, 80)):
            sentence = rng.choices(vocabulary, weights, k=rng.randint(6, 24))
            sentences.append(" ".join(sentence).capitalize() + rng.choice(".....?!"))
        text = "\n".join(" ".join(sentences[i:i + 5]) for i in range(0, len(sentences), 5))
        handles[index % FILES].write(json.dumps({"id": f"doc-{index:07d}", "text": text}) + "\n")
    for handle in handles:
        handle.close()
    (corpus / ".complete").write_text(str(documents))
    return corpus


def tokenizer(corpus: Path) -> Path:
    if not TOKENIZER.exists():
        sample = [json.loads(line)["text"] for line in open(corpus / "part-0.jsonl")][:3000]
        train_tokenizer(sample, TOKENIZER, vocab_size=32000)
    return TOKENIZER






def run_ours(corpus: Path, work: Path) -> dict:
    common = ["run", "--input-dir", str(corpus), "--output-dir", str(work / "out"), *SMALL, "--tokenize",
              str(TOKENIZER)]
    began = time.perf_counter()
    for shard in range(SHARDS):
        wait_peak(curator(work / "logs" / f"curation-{shard}.log", *common, "--phase", "curation",
                          shard=(shard, SHARDS)))
    curation = time.perf_counter() - began
    began = time.perf_counter()
    peak = max(wait_peak(p, with_child=True)  # the element and its encoder process
               for p in [curator(work / "logs" / f"tokenize-{i}.log", *common, "--phase", "tokenize", shard=(i, SHARDS))
                         for i in range(SHARDS)])
    tokenize = time.perf_counter() - began
    peak = max(peak, wait_peak(curator(work / "logs" / "tokens.log", *common, "--phase", "tokens")))
    manifest = json.loads((work / "out" / "tokens" / "manifest.json").read_text())
    return {"curation": curation, "tokenize": tokenize, "wall": time.perf_counter() - began,
            "peak": peak, "tokens": manifest["tokens"], "documents": manifest["documents"]}


DATATROVE = r"""
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens.megatron_tokenizer import MegatronDocumentTokenizer
corpus, tokenizer, work = sys.argv[1:]
LocalPipelineExecutor([JsonlReader(corpus, glob_pattern="*.jsonl"),
                       MegatronDocumentTokenizer(work + "/tokens", tokenizer_name_or_path=tokenizer,
                                                 eos_token="<|endoftext|>")],
                      tasks=8, workers=2, logging_dir=work + "/logs").run()
"""

BARE = r"""
import struct, sys
from itertools import chain
from pathlib import Path
import numpy as np
import pyarrow.json as pj
from tokenizers import Tokenizer
corpus, tokenizer, out = sys.argv[1:]
tok = Tokenizer.from_file(tokenizer)
eos = tok.token_to_id("<|endoftext|>")
lengths, tokens = [], 0
with open(out + ".bin", "wb") as data:
    for path in sorted(Path(corpus).glob("*.jsonl")):
        texts = pj.read_json(path).column("text").to_pylist()
        for start in range(0, len(texts), 1000):
            ids = [encoding.ids + [eos] for encoding in tok.encode_batch_fast(texts[start:start + 1000],
                                                                              add_special_tokens=False)]
            lengths += map(len, ids)
            data.write(np.fromiter(chain.from_iterable(ids), dtype=np.uint16).tobytes())
n = len(lengths)
pointers = np.concatenate([[0], np.cumsum(np.array(lengths[:-1], dtype=np.int64) * 2)])
with open(out + ".idx", "wb") as index:
    index.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n, n + 1))
    index.write(np.array(lengths, "<i4").tobytes() + pointers.astype("<i8").tobytes() + np.arange(n + 1, dtype="<i8").tobytes())
REPORT = {"tokens": sum(lengths)}
"""


def side_by_side(documents: int) -> None:
    corpus = make_corpus(documents)
    tokenizer(corpus)
    work = CACHE / "tokenize" / f"work-{documents}"
    shutil.rmtree(work, ignore_errors=True)
    ours = run_ours(corpus, work / "ours")
    curated = work / "ours" / "out"  # datatrove and the bare loop read the same curated files
    began = time.perf_counter()
    theirs = measure_snippet(DATATROVE, str(curated), str(TOKENIZER), str(work / "datatrove"),
                             env=reference_environment())
    theirs_wall = time.perf_counter() - began
    bare = measure_snippet(BARE, str(curated), str(TOKENIZER), str(work / "bare"))
    assert bare["tokens"] == ours["tokens"], (bare["tokens"], ours["tokens"])
    on_mimalloc = measure_snippet(BARE, str(curated), str(TOKENIZER), str(work / "bare-mimalloc"),
                                  env=dict(os.environ, PYTHONPATH=str(REPO), LD_PRELOAD=bundled_mimalloc()))
    size = sum(p.stat().st_size for p in curated.glob("*.jsonl")) / 2**20
    rate = ours["tokens"] / ours["wall"]
    print(f"\n{documents:,} documents ({size:,.0f} MiB of JSONL), {ours['tokens']:,} tokens:")
    print(f"  curator-array tokenize + tokens phases {ours['wall']:7.1f} s  {rate:>12,.0f} tokens/s  "
          f"peak RSS {ours['peak']:,.0f} MiB per element with its encoder   "
          f"(curation with token_count before: {ours['curation']:.1f} s)")
    print(f"  datatrove MegatronDocumentTokenizer    {theirs_wall:7.1f} s  {ours['tokens'] / theirs_wall:>12,.0f} tokens/s  "
          f"peak RSS {theirs['peak_rss'] / 2**20:,.0f} MiB (+{theirs['children_peak_rss'] / 2**20:,.0f} MiB workers)")
    for label, loop in (("bare encode_batch_fast loop, 1 process", bare), ("  the same loop on mimalloc", on_mimalloc)):
        print(f"  {label:38s} {loop['wall']:7.1f} s  {ours['tokens'] / loop['wall']:>12,.0f} tokens/s  "
              f"peak RSS {loop['peak_rss'] / 2**20:,.0f} MiB")
    print(f"  ratios: curator-array / datatrove = {theirs_wall / ours['wall']:.2f}x (goal 1.5x);  "
          f"curator-array / bare loop = {bare['wall'] / ours['wall']:.2f}x (goal 0.8x), "
          f"{on_mimalloc['wall'] / ours['wall']:.2f}x the loop on mimalloc")


def main() -> None:
    ensure_reference_site()
    for documents in SIZES:
        side_by_side(documents)


if __name__ == "__main__":
    main()

"""The tokens phase's merge, side by side in one run on 2 cores: 20 token-file sets shuffled
across the whole run against today's one unshuffled stream. Prints figures, asserts nothing.

Input: 1 GB of real multilingual prose (``real_text.write_shard``: documents of a crawl's
lengths, 16 JSONL files). Each document gets a ``bucket`` of 20, as quality buckets would be
(a stand-in: its id's hash, so the sets are of about equal size), by this file's own
pipeline (``--pipeline bench_token_sets:build``). Two runs of 4 shards tokenize it once each
(the tokenize phase is the same work for both); then the tokens phase alone is timed again
and again, the two runs in turn (``run --phase tokens --force``: the whole element, Python's
start included), with its process tree's peak PSS:

- sets: ``--token-partition-by bucket`` (20 sets), shuffled by key (the default);
- stream: ``--no-token-shuffle``, no sets: the shards' files joined in order (today's merge).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import zlib
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_text import write_shard  # noqa: E402
from support import CACHE, REPO, ROUNDS, in_turns, timed_tree  # noqa: E402

sys.path.insert(0, str(REPO))
WORK = CACHE / "token-sets"
INPUT = CACHE / "token-sets-input"
SHARDS = 4
SMALL = ["--num-cpus", "2", "--object-store-memory", str(300 * 2**20), "--no-progress"]
CLI = [sys.executable, "-m", "curator_array.cli"]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(Path(__file__).resolve().parent)]))
WAYS = {"sets": ["--token-partition-by", "bucket"], "stream": ["--no-token-shuffle"]}


def build(options):
    """Read, give each document a bucket of 20, write (the bench's pipeline)."""
    import pyarrow as pa

    from curator_array.stages.base import ProcessingStage

    class Bucket(ProcessingStage):
        name = "bucket"

        def process(self, task):
            ids = task.table.column("id").to_pylist()
            buckets = pa.array([zlib.crc32(str(i).encode()) % 20 for i in ids], pa.int64())
            return dataclasses.replace(task, table=task.table.append_column("bucket", buckets))

    return [options.reader(), Bucket(), options.writer()]


def tokenized(tokenizer: Path, way: str) -> Path:
    out = WORK / way
    shutil.rmtree(out, ignore_errors=True)
    for shard in range(SHARDS):
        env = {**ENV, "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": str(shard),
               "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": str(SHARDS)}
        subprocess.run([*CLI, "run", "--pipeline", "bench_token_sets:build", "--input-dir", str(INPUT),
                        "--output-dir", str(out), "--tokenize", str(tokenizer), *WAYS[way], *SMALL],
                       env=env, check=True, cwd=Path(__file__).resolve().parent,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def main() -> None:
    from tests.support.tokenizer import train_tokenizer

    documents = write_shard(INPUT, 16, 1_000_000_000)
    size = sum(path.stat().st_size for path in INPUT.glob("*.jsonl"))
    sample = [json.loads(line)["text"] for line in (INPUT / "part-000.jsonl").open(encoding="utf-8")][:20_000]
    tokenizer = train_tokenizer(sample, WORK / "tokenizer.json", vocab_size=8000)
    print(f"token-file sets: {documents:,} documents, {size / 1e9:.2f} GB of JSONL, {SHARDS} shards, 2 cores")
    outs = {way: tokenized(tokenizer, way) for way in WAYS}
    manifest = json.loads((outs["sets"] / "tokens" / "manifest.json").read_text())
    tokens = manifest["tokens"]
    print(f"  {tokens:,} tokens in {len(manifest['sets'])} sets, {len(manifest['files'])} files")

    def merge(way: str) -> tuple[float, float]:
        return timed_tree([*CLI, "run", "--pipeline", "bench_token_sets:build", "--input-dir", str(INPUT),
                           "--output-dir", str(outs[way]), "--tokenize", str(tokenizer), *WAYS[way], *SMALL,
                           "--phase", "tokens", "--force"], ENV, cwd=Path(__file__).resolve().parent)

    turns = in_turns({way: partial(merge, way) for way in WAYS})
    for way, turn in turns.items():
        print(f"  {way}: tokens phase {turn.median:.1f} s ({turn} s), {tokens / turn.median / 1e6:.1f} M tokens/s, "
              f"peak {turn.peak:,.0f} MiB")
    print(f"  the shuffled sets merge at {turns['stream'].median / turns['sets'].median:.2f}x the stream's speed; "
          f"medians of {ROUNDS} rounds in turn")


if __name__ == "__main__":
    main()

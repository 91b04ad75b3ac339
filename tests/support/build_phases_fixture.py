"""Writes ``tests/fixtures/checkpoint-all-phases``: a whole run of every phase kind, as a
release wrote it, for the tests that every later release still reads, retries and reports it
(``tests/unit/test_all_phases_fixture.py``).

    .venv/bin/python tests/support/build_phases_fixture.py

Two curation shards of 48 documents (some copied, some near-copies), fuzzy dedup, a small
quantized quality model with a top half kept in 4 buckets, a small tokenizer and Megatron
token files. Written under ``/tmp/curator-array-fixture`` so that the paths the run pins
read the same wherever the fixture is copied to; then copied here with what status, retry
and the report said of it (``expected-status.json``). Run it only to make a new fixture:
an existing one is the record of its release.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
WORK = Path("/tmp/curator-array-fixture")
TARGET = REPO / "tests" / "fixtures" / "checkpoint-all-phases"
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]


def documents() -> list[dict]:
    from tests.support.quality_corpus import paragraphs

    rng = random.Random(3)
    texts = [p["text"] for p in paragraphs() if len(p["text"].split()) >= 20][:40]
    rows = [{"id": f"doc-{i:02d}", "text": text} for i, text in enumerate(texts)]
    for copy in range(8):
        words = rows[copy]["text"].split()
        if copy % 2:
            words[rng.randrange(len(words))] = "changed"
        rows.append({"id": f"copy-{copy}", "text": " ".join(words)})
    return rows


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    done = subprocess.run([sys.executable, "-m", "curator_array.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=WORK)
    if done.returncode:
        sys.exit(f"{' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")
    return done


def main() -> None:
    from curator_array.classify.training import Hyperparameters, train
    from tests.support.quality_corpus import training_files
    from tests.support.tokenizer import train_tokenizer

    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "in").mkdir(parents=True)
    rows = documents()
    for part in range(2):
        (WORK / "in" / f"part-{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[part::2]))
    positive, negative = training_files(WORK / "training")
    train([str(positive)], [str(negative)], WORK / "q.ftz", quantize=True,
          settings=Hyperparameters(dim=8, bucket=2000, epoch=10, lr=0.5))
    train_tokenizer([r["text"] for r in rows], WORK / "tokenizer.json", 400)
    options = ["--input-dir", str(WORK / "in"), "--output-dir", str(WORK / "out"), *SMALL, "--dedup", "fuzzy",
               "--quality-model", f"q={WORK / 'q.ftz'}", "--keep-top-fraction", "q=0.5", "--quality-buckets", "4",
               "--tokenize", str(WORK / "tokenizer.json")]
    for shard in range(2):
        cli("run", *options, env={"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": str(shard),
                                  "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "2"})
    shutil.rmtree(TARGET, ignore_errors=True)
    shutil.copytree(WORK / "out", TARGET)
    status = json.loads(cli("status", "--checkpoint-path", str(WORK / "out"), "--json").stdout)
    (TARGET.parent / "checkpoint-all-phases.expected-status.json").write_text(json.dumps(status, indent=1,
                                                                                          sort_keys=True) + "\n")
    print(f"wrote {TARGET} ({sum(p.stat().st_size for p in TARGET.rglob('*') if p.is_file()):,} bytes)")


if __name__ == "__main__":
    main()

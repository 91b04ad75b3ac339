"""Regenerate the bundled sample data (deterministic: same bytes every time).

    python sample_data/generate.py

JSONL (one file gzipped) and Parquet copies of small synthetic web-text documents,
including records the filters drop: empty or blank text, very short texts, and exact
duplicates within a file.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
WORDS = (
    "data curation pipeline shard cluster node array retry manifest checkpoint text document "
    "filter quality language web crawl download parquet arrow ray slurm job task token corpus "
    "river mountain library science history music garden recipe travel market energy ocean"
).split()


def documents(file_index: int, rng: random.Random) -> list[dict]:
    docs = []
    for n in range(120):
        kind = rng.random()
        if kind < 0.05:
            text = ""
        elif kind < 0.08:
            text = "   \n "
        elif kind < 0.15:
            text = " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))
        else:
            text = " ".join(rng.choices(WORDS, k=rng.randint(20, 120))).capitalize() + "."
        docs.append({"id": f"doc-{file_index:03d}-{n:04d}", "url": f"https://example.org/{file_index}/{n}", "text": text})
    for n in range(6):  # exact duplicates of earlier texts, new ids
        source = docs[rng.randrange(20, len(docs))]
        docs.append({"id": f"doc-{file_index:03d}-dup{n}", "url": source["url"] + "?copy", "text": source["text"]})
    return docs


def main() -> None:
    rng = random.Random(20261129)
    jsonl_dir, parquet_dir = HERE / "jsonl", HERE / "parquet"
    jsonl_dir.mkdir(exist_ok=True)
    parquet_dir.mkdir(exist_ok=True)
    for index in range(12):
        docs = documents(index, rng)
        lines = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
        if index == 11:
            with open(jsonl_dir / f"part-{index:03d}.jsonl.gz", "wb") as raw:
                with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
                    fh.write(lines.encode())
        else:
            (jsonl_dir / f"part-{index:03d}.jsonl").write_text(lines, encoding="utf-8")
        if index < 6:
            pq.write_table(pa.Table.from_pylist(docs), parquet_dir / f"part-{index:03d}.parquet")


if __name__ == "__main__":
    main()

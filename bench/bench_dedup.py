"""Near-duplicate removal, side by side in one run: curator-array's dedup core against
datatrove's 4-stage MinHash pipeline, same n-grams (5), bands (14) and hashes (8).

The corpus (``DEDUP_DOCS`` documents, default 20,000, in two JSONL files) has planted
duplicates: 5% exact copies and 5% copies with about 1% of their words edited (a few
originals get two copies). Ours runs
its file-level phases in one process (signatures per file, pairs per bucket, clusters);
datatrove runs MinhashDedupSignature → Buckets → Cluster → Filter on its
LocalPipelineExecutor with 2 workers (its own environment, pinned). Prints wall time of
each, the ratio, peak memory, precision and recall on the planted copies, and the Jaccard
agreement of the two removed sets. Asserts nothing. The dedup phases are not yet wired
into runs, so this measures the algorithms, not a SLURM run.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, measure_snippet  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.reference_site import ensure_reference_site, reference_environment  # noqa: E402

DOCS = int(os.environ.get("DEDUP_DOCS", "20000"))
CORPUS = CACHE / f"dedup-{DOCS}"

OURS = r"""
import json, sys, time, pathlib
import pyarrow as pa
from curator_array.dedup.phases import removed_keys, write_bucket_pairs, write_signatures
corpus, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
timing = {}
began = time.perf_counter()
signature_files = []
for number, path in enumerate(sorted(corpus.glob("*.jsonl"))):
    rows = [json.loads(line) for line in path.open()]
    out = work / f"signatures-{number}.parquet"
    write_signatures([r["id"] for r in rows], pa.array([r["text"] for r in rows]), out)
    signature_files.append(out)
timing["signatures"] = time.perf_counter() - began
began = time.perf_counter()
pair_files = []
for bucket in range(2):
    pair_files.append(work / f"pairs-{bucket}.parquet")
    write_bucket_pairs(signature_files, bucket, 2, pair_files[-1])
timing["buckets"] = time.perf_counter() - began
began = time.perf_counter()
removed, sizes = removed_keys(pair_files)
timing["clusters"] = time.perf_counter() - began
REPORT = {"removed": sorted(removed), "timing": timing}
"""

DATATROVE = r"""
import gzip, json, pathlib, sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
corpus, work = sys.argv[1], pathlib.Path(sys.argv[2])
config = MinhashConfig()  # 5-grams, 14 buckets x 8 hashes, 64-bit
timing = {}
stages = [
    ("signatures", [JsonlReader(corpus, glob_pattern="*.jsonl"), MinhashDedupSignature(str(work / "sigs"), config=config)], 2),
    ("buckets", [MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=config)], config.num_buckets),
    ("clusters", [MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=config)], 1),
    ("filter", [JsonlReader(corpus, glob_pattern="*.jsonl"), MinhashDedupFilter(str(work / "remove"),
                exclusion_writer=JsonlWriter(str(work / "removed")))], 2),
]
for name, pipeline, tasks in stages:
    began = time.perf_counter()
    LocalPipelineExecutor(pipeline, tasks=tasks, workers=2, logging_dir=str(work / "logs" / name)).run()
    timing[name] = time.perf_counter() - began
removed = [json.loads(line)["id"] for path in (work / "removed").rglob("*.jsonl.gz") for line in gzip.open(path, "rt")]
REPORT = {"removed": sorted(removed), "timing": timing}
"""


def make_corpus() -> dict[str, str]:
    """The corpus, once; each planted copy's id → its original's id."""
    planted_file = CORPUS / "planted-pairs.json"
    if planted_file.exists():
        return json.loads(planted_file.read_text())
    CORPUS.mkdir(parents=True, exist_ok=True)
    rng = random.Random(3)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(20000)]
    originals = int(DOCS * 0.9)
    texts = [" ".join(rng.choices(vocabulary, k=rng.randint(150, 350))) for _ in range(originals)]
    planted: dict[str, str] = {}
    while len(texts) < DOCS:
        original = rng.randrange(originals)
        source = texts[original]
        if len(planted) % 2:
            words = source.split()
            for position in rng.sample(range(len(words)), max(1, len(words) // 100)):
                words[position] = rng.choice(vocabulary)
            source = " ".join(words)
        planted[f"doc-{len(texts):08d}"] = f"doc-{original:08d}"
        texts.append(source)
    order = list(range(len(texts)))
    rng.shuffle(order)
    for part in range(2):
        with open(CORPUS / f"part-{part}.jsonl", "w") as out:
            for index in order[part::2]:
                out.write(json.dumps({"id": f"doc-{index:08d}", "text": texts[index]}) + "\n")
    planted_file.write_text(json.dumps(planted))
    return planted


def planted_groups(planted: dict[str, str]) -> list[frozenset[str]]:
    """Each original with its planted copies."""
    groups: dict[str, set[str]] = {}
    for copy, original in planted.items():
        groups.setdefault(original, {original}).add(copy)
    return [frozenset(group) for group in groups.values()]


def resolved_groups(removed: set[str], planted: dict[str, str]) -> set[frozenset[str]]:
    """The planted groups left with exactly one document: which one stays is each tool's own
    rule (ours: the smallest id; datatrove: the first it reads)."""
    return {group for group in planted_groups(planted) if len(group - removed) == 1}


def quality(removed: set[str], planted: dict[str, str]) -> str:
    involved = set(planted) | set(planted.values())
    groups = planted_groups(planted)
    wrong = len(removed - involved)
    return (f"precision {(len(removed) - wrong) / max(1, len(removed)):.3f}, "
            f"recall {len(resolved_groups(removed, planted)) / len(groups):.3f} (of {len(groups)} groups)")


def main() -> None:
    import shutil

    planted = make_corpus()
    ensure_reference_site()
    for side in ("ours", "datatrove"):
        shutil.rmtree(CACHE / f"dedup-work-{side}", ignore_errors=True)
        (CACHE / f"dedup-work-{side}").mkdir(parents=True)
    ours = measure_snippet(OURS, str(CORPUS), str(CACHE / "dedup-work-ours"))
    theirs = measure_snippet(DATATROVE, str(CORPUS), str(CACHE / "dedup-work-datatrove"), env=reference_environment())
    mine, their = set(ours["removed"]), set(theirs["removed"])
    print(f"corpus: {DOCS:,} documents in 2 JSONL files, {len(planted):,} planted copies (half exact, half ~1% edited)")
    for label, result, removed in (("curator-array dedup core", ours, mine), ("datatrove MinHash, 4 stages", theirs, their)):
        phases = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in result["timing"].items())
        print(f"  {label:<30}{result['wall']:>7.1f}s  peak RSS {result['peak_rss'] / 2**20:>5.0f} MiB "
              f"(children {result['children_peak_rss'] / 2**20:.0f} MiB)  removed {len(removed):,}: "
              f"{quality(removed, planted)}  [{phases}]")
    print(f"ratio datatrove / curator-array wall time = {theirs['wall'] / ours['wall']:.2f}x")
    print(f"agreement of removed ids (Jaccard) = {len(mine & their) / max(1, len(mine | their)):.3f} (the tools keep "
          "different copies: ours the smallest id, datatrove the first it reads)")
    ours_groups, their_groups = resolved_groups(mine, planted), resolved_groups(their, planted)
    print(f"agreement of resolved duplicate groups (Jaccard) = "
          f"{len(ours_groups & their_groups) / max(1, len(ours_groups | their_groups)):.3f}")


if __name__ == "__main__":
    main()

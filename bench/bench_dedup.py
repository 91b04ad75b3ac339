"""Fuzzy dedup of a whole run, side by side in one run on the same CPUs: curator-array's
dedup phases (`curator-array run --phase ...`, each element its own process) against
datatrove's 4-stage MinHash pipeline (MinhashDedupSignature → Buckets → Cluster → Filter on
its LocalPipelineExecutor), same n-grams (5), bands (14) and hashes per band (8).

The corpus (``DEDUP_DOCS`` documents, default 1,000,000, in 8 JSONL files) has planted
duplicates: 10% of the documents are copies, half exact and half with about 1% of their
words edited. curator-array's curation phase (read, write; 2 shards) runs first and is
timed apart; both tools then read the same curated files, in the same order, so both keep
the first copy of each cluster (ours: the smallest ``file#row``; datatrove: the smallest
(file, doc) of a pair) and their removed sets can be compared id for id.

Both sides use 2 processes at a time: our phases run their elements 2 at once (2 shards,
2 buckets); datatrove runs 8 signature tasks, 14 bucket tasks and 8 filter tasks on 2
workers. A bare loop of rensa's Rust MinHash (``rensa_loop``, ``Pool(2)``) over the same
curated files gives the signatures work its yardstick. Prints wall time of each phase and
in all, the ratios, the peak memory of each phase (its largest element), precision and
recall on the planted copies and the Jaccard agreement of the removed ids, overall and
cluster by cluster. Asserts nothing.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rensa_loop import bare, ensure_rensa  # noqa: E402
from support import CACHE, REPO, curator, wait_peak  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.reference_site import ensure_reference_site, reference_environment  # noqa: E402

DOCS = int(os.environ.get("DEDUP_DOCS", "1000000"))
FILES, SHARDS, BUCKETS, WORKERS = 8, 2, 2, 2
CORPUS = CACHE / f"dedup-{DOCS}"
PHASES = ("signatures", "buckets", "clusters", "removal")
ELEMENTS = {"signatures": SHARDS, "buckets": BUCKETS, "clusters": 1, "removal": SHARDS}
SMALL = ["--num-cpus", "2", "--object-store-memory", str(300 * 2**20), "--no-progress"]

DATATROVE_STAGE = r"""
import gzip, json, pathlib, sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
stage, corpus, work, files = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), int(sys.argv[4])
config = MinhashConfig()  # 5-grams, 14 buckets x 8 hashes, 64-bit
pipeline, tasks = {
    "signatures": ([JsonlReader(corpus, glob_pattern="*.jsonl"), MinhashDedupSignature(str(work / "sigs"), config=config)], files),
    "buckets": ([MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=config)], config.num_buckets),
    "clusters": ([MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=config)], 1),
    "filter": ([JsonlReader(corpus, glob_pattern="*.jsonl"), MinhashDedupFilter(str(work / "remove"),
                exclusion_writer=JsonlWriter(str(work / "removed")))], files),
}[stage]
LocalPipelineExecutor(pipeline, tasks=tasks, workers=2, logging_dir=str(work / "logs" / stage)).run()
"""


def make_corpus() -> dict[str, str]:
    """The corpus, once; each planted copy's id → its original's id."""
    planted_file = CORPUS / "planted-pairs.json"
    if planted_file.exists():
        return json.loads(planted_file.read_text())
    shutil.rmtree(CORPUS, ignore_errors=True)
    CORPUS.mkdir(parents=True)
    rng = random.Random(3)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(20000)]
    originals = int(DOCS * 0.9)
    texts = [" ".join(rng.choices(vocabulary, k=rng.randint(100, 250))) for _ in range(originals)]
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
    for part in range(FILES):
        with open(CORPUS / f"part-{part}.jsonl", "w") as out:
            for index in order[part::FILES]:
                out.write(json.dumps({"id": f"doc-{index:08d}", "text": texts[index]}) + "\n")
    planted_file.write_text(json.dumps(planted))
    return planted






def run_ours(work: Path) -> dict:
    """The curation phase (2 shards), then each dedup phase's elements, 2 processes at a time."""
    common = ["run", "--input-dir", str(CORPUS), "--output-dir", str(work / "out"), *SMALL, "--dedup", "fuzzy",
              "--dedup-buckets", str(BUCKETS)]
    began = time.perf_counter()
    for shard in range(SHARDS):
        wait_peak(curator(work / "logs" / f"curation-{shard}.log", *common, "--phase", "curation",
                          shard=(shard, SHARDS)))
    curation = time.perf_counter() - began
    timing, peaks = {}, {}
    for phase in PHASES:
        began = time.perf_counter()
        elements = list(range(ELEMENTS[phase]))
        peak = 0.0
        for first in range(0, len(elements), WORKERS):
            group = [curator(work / "logs" / f"{phase}-{i}.log", *common, "--num-cpus", "1",  # 2 elements at once
                             "--phase", phase, shard=(i, ELEMENTS[phase]))
                     for i in elements[first:first + WORKERS]]
            peak = max([peak, *(wait_peak(p) for p in group)])
        timing[phase], peaks[phase] = time.perf_counter() - began, peak
    curated = work / "out" / ".curated"
    every = {json.loads(line)["id"] for path in curated.glob("*.jsonl") for line in path.open()}
    kept = {json.loads(line)["id"] for path in (work / "out").glob("*.jsonl") for line in path.open()}
    return {"curation": curation, "timing": timing, "peaks": peaks, "removed": every - kept}


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return 0.0


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = {root}, [root]
    while frontier:
        current = frontier.pop()
        children = [pid for pid, parent in parents.items() if parent == current and pid not in found]
        found.update(children)
        frontier += children
    return found


def largest_process_mib(process: subprocess.Popen, interval_s: float = 0.1) -> float:
    """Wait for ``process``, sampling its process tree (datatrove's workers are forkserver
    children, which rusage never sees); the largest RSS any one process had."""
    peak = 0.0
    while process.poll() is None:
        peak = max([peak, *(_rss_mib(pid) for pid in _descendants(process.pid))])
        time.sleep(interval_s)
    if process.returncode:
        raise RuntimeError(f"{process.args} failed")
    return peak


def run_datatrove(curated: Path, work: Path) -> dict:
    timing, peaks = {}, {}
    code = DATATROVE_STAGE
    for stage in ("signatures", "buckets", "clusters", "filter"):
        began = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-c", code, stage, str(curated), str(work), str(FILES)],
                                   env=reference_environment(), cwd=REPO, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        peaks[stage] = largest_process_mib(process)
        timing[stage] = time.perf_counter() - began
    removed = {json.loads(line)["id"] for path in (work / "removed").rglob("*.jsonl.gz") for line in gzip.open(path, "rt")}
    return {"timing": timing, "peaks": peaks, "removed": removed}


def element_rates(logs: Path) -> list[tuple[int, float]]:
    """Each signatures element's documents and seconds, as its log's last line reports them."""
    found = []
    for log in sorted(logs.glob("signatures-*.log")):
        match = re.search(r"complete in ([0-9.]+)s: documents (\d+)", log.read_text())
        found.append((int(match.group(2)), float(match.group(1))))
    return found


def planted_groups(planted: dict[str, str]) -> dict[str, set[str]]:
    """Each planted original with its copies."""
    groups: dict[str, set[str]] = {}
    for copy, original in planted.items():
        groups.setdefault(original, {original}).add(copy)
    return groups


def by_cluster(mine: set[str], theirs: set[str], planted: dict[str, str]) -> str:
    """The two tools' decisions compared cluster by cluster (each planted original and its copies)."""
    groups = planted_groups(planted).values()
    same_count = sum(len(group & mine) == len(group & theirs) for group in groups)
    same_members = sum(group & mine == group & theirs for group in groups)
    return (f"by cluster, of {len(groups):,} planted clusters: the same number removed in "
            f"{same_count / len(groups):.4f}, "
            f"the same members removed in {same_members / len(groups):.4f}; removed outside them: "
            f"ours {len(mine - set(planted) - set(planted.values())):,}, "
            f"datatrove's {len(theirs - set(planted) - set(planted.values())):,}")


def quality(removed: set[str], planted: dict[str, str]) -> str:
    groups = planted_groups(planted)
    involved = set(planted) | set(planted.values())
    wrong = len(removed - involved)
    resolved = sum(1 for group in groups.values() if len(group - removed) == 1)
    return (f"precision {(len(removed) - wrong) / max(1, len(removed)):.4f}, "
            f"recall {resolved / len(groups):.4f} (of {len(groups):,} planted groups)")


def main() -> None:
    planted = make_corpus()
    ensure_reference_site()
    work = CACHE / "dedup-work"
    shutil.rmtree(work, ignore_errors=True)
    ensure_rensa()
    ours = run_ours(work / "ours")
    curated = work / "ours" / "out" / ".curated"
    rensa = bare(sorted(str(path) for path in curated.glob("*.jsonl")), WORKERS)
    theirs = run_datatrove(curated, work / "datatrove")
    print(f"corpus: {DOCS:,} documents in {FILES} JSONL files, {len(planted):,} planted copies (half exact, half ~1% "
          f"edited); curator-array's curation phase (2 shards, not compared) {ours['curation']:.1f}s")
    for label, result in (("curator-array --dedup fuzzy", ours), ("datatrove MinHash, 4 stages", theirs)):
        total = sum(result["timing"].values())
        phases = ", ".join(f"{name} {seconds:.1f}s / {result['peaks'][name]:.0f} MiB"
                           for name, seconds in result["timing"].items())
        print(f"  {label:<29}{total:>7.1f}s  removed {len(result['removed']):,}: "
              f"{quality(result['removed'], planted)}\n    per phase (wall / peak RSS of its largest process): {phases}")
    wall_ours, wall_theirs = sum(ours["timing"].values()), sum(theirs["timing"].values())
    signatures = ours["timing"]["signatures"]
    print(f"signatures work alone, 2 cores: curator-array {signatures:.1f}s, bare rensa loop {rensa:.1f}s "
          f"(ours {rensa / signatures:.2f}x its speed), datatrove {theirs['timing']['signatures']:.1f}s")
    elements = element_rates(work / "ours" / "logs")
    per_core = sum(documents for documents, _ in elements) / sum(seconds for _, seconds in elements)
    print(f"  per core (the shards' files are not split evenly, the rensa pool's are): ours "
          f"{per_core:,.0f} documents/s ({', '.join(f'{d:,} in {s:.1f}s' for d, s in elements)}, process start "
          f"not counted), rensa {DOCS / rensa / WORKERS:,.0f} (its pool's start counted): "
          f"{per_core / (DOCS / rensa / WORKERS):.2f}x")
    print(f"all phases: ratio datatrove / curator-array wall time = {wall_theirs / wall_ours:.2f}x")
    mine, their = ours["removed"], theirs["removed"]
    print(f"agreement of removed ids (Jaccard) = {len(mine & their) / max(1, len(mine | their)):.4f}; "
          f"{by_cluster(mine, their, planted)}")


if __name__ == "__main__":
    main()

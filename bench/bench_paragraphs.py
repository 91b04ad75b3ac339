"""Paragraph dedup (DCLM's BFF ``old-both``) over a whole run, at 1 M and 10 M paragraphs.

The corpus: pages of real paragraphs from the multilingual fixtures (Debian's and GNOME's
manuals and prose, ten languages, Latin, Cyrillic and CJK scripts; paragraphs made of halves
of two fixture paragraphs beyond the fixtures' own), each with its site's boilerplate
(banners, footers, navigation lines), some quoting earlier pages' paragraphs (exactly or with
1% of the words changed), some copies of earlier pages, some repeating a paragraph
(``tests.support.planted_paragraphs``), written as 8 JSONL files, made once and kept.

Ours: the curation phase (2 shards), then ``paragraph_ngrams`` (2 elements), ``paragraph_buckets``
(``BUCKETS`` elements) and ``paragraph_removal`` (2 elements), each element its own process
with one CPU, two at a time on the 2 cores. Printed: each phase's wall time and its largest
element's peak memory, and the three paragraph phases' paragraphs per second per core: their
paragraphs over the seconds their elements ran (each on one CPU, as their manifests record
them), and over the phases' wall time on the 2 cores (shards of uneven size and each
element's process start-up included).

At 1 M paragraphs, side by side: a bare one-process Python loop of the same decision over the
same curated files in the run's order (``reference_loop``: BFF's ``old-both`` with a Python set
of n-gram hashes, tokens by the same boundary regex as ours), its paragraphs per second and
its peak memory; and how many documents and paragraphs the two decide alike. Asserts nothing.

    python bench/bench_paragraphs.py            # 1 M and 10 M
    PARAGRAPHS=1000000 python bench/bench_paragraphs.py
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, curator, wait_peak  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.planted_paragraphs import planted_documents  # noqa: E402

SIZES = [int(n) for n in os.environ.get("PARAGRAPHS", "1000000,10000000").split(",")]
FILES = 8
CHUNK = 20_000  # documents per generated chunk (each with its own sites and copies)
PHASES = ("paragraph_ngrams", "paragraph_buckets", "paragraph_removal")
COMPARED_UP_TO = 1_000_000  # the bare loop's set of a larger run would not fit here


def corpus(paragraphs: int) -> Path:
    directory = CACHE / f"paragraph-corpus-{paragraphs}"
    marker = directory / ".complete"
    if marker.exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    handles = [open(directory / f"part-{i:02d}.jsonl", "w", encoding="utf-8") for i in range(FILES)]
    written, seed, number = 0, 0, 0
    while written < paragraphs:
        for text in planted_documents(CHUNK, seed=seed):
            handles[number % FILES].write(json.dumps({"id": f"p{number}", "text": text}, ensure_ascii=False) + "\n")
            written += 1 + text.count("\n")
            number += 1
            if written >= paragraphs:
                break
        seed += 1
    for handle in handles:
        handle.close()
    marker.write_text(str(written))
    return directory


def run_ours(inputs: Path, work: Path, buckets: int) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    common = ["run", "--input-dir", str(inputs), "--output-dir", str(work / "out"), "--no-progress",
              "--dedup", "paragraphs", "--dedup-buckets", str(buckets)]
    timing, peaks = {}, {}
    began = time.perf_counter()
    peaks["curation"] = max(wait_peak(curator(work / "logs" / f"curation-{s}.log", *common, "--num-cpus", "1",
                                              "--phase", "curation", shard=(s, 2))) for s in range(2))
    timing["curation"] = time.perf_counter() - began
    for phase in PHASES:
        elements = list(range(buckets if phase == "paragraph_buckets" else 2))
        began, peak = time.perf_counter(), 0.0
        for start in range(0, len(elements), 2):
            group = [curator(work / "logs" / f"{phase}-{i}.log", *common, "--num-cpus", "1", "--phase", phase,
                             shard=(i, 2)) for i in elements[start:start + 2]]
            peak = max([peak, *(wait_peak(p) for p in group)])
        timing[phase], peaks[phase] = time.perf_counter() - began, peak
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "curator_array.cli", "status", "--checkpoint-path", str(work / "out"), "--json"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout)
    metadata = work / "out" / ".nemo_curator_metadata" / ".phases"
    element_seconds = {phase: sum(json.loads(path.read_text())["duration_s"]
                                  for path in (metadata / phase).glob("completed_*.json")) for phase in PHASES}
    return {"timing": timing, "peaks": peaks, "element_seconds": element_seconds,
            "counts": {p["phase"]: p["counts"] for p in status["phases"]}}


def curated_texts(out: Path):
    """The curated documents in the run's order (files sorted by path, rows in order)."""
    for path in sorted((out / ".curated").glob("*.jsonl")):
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)


def reference_loop(out: Path) -> dict:
    """BFF's ``old-both`` in one process, a set of n-gram hashes for its filter."""
    from curator_array.dedup.paragraphs import paragraphs_of
    from curator_array.text.boundaries import bff_tokens

    seen: set[int] = set()
    began = time.perf_counter()
    paragraphs, decisions = 0, {}
    for document in curated_texts(out):
        kept, contained_all, total_all = [], 0, 0
        for paragraph in paragraphs_of(document["text"]):
            tokens = bff_tokens(paragraph)
            grams = [hash(tuple(tokens[i:i + 13])) for i in range(len(tokens) - 12)]
            contained = sum(1 for gram in grams if gram in seen)
            total_all, contained_all = total_all + len(grams), contained_all + contained
            paragraphs += 1
            if grams and contained / len(grams) > 0.8:
                continue
            seen.update(grams)
            kept.append(paragraph)
        emptied = total_all > 0 and contained_all / total_all > 0.8
        result = "" if emptied else "".join(kept)
        decisions[document["id"]] = result if result.strip() else None
    wall = time.perf_counter() - began
    return {"wall": wall, "paragraphs": paragraphs, "decisions": decisions,
            "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def ours_decided(out: Path) -> dict[str, str]:
    return {doc["id"]: doc["text"] for path in sorted(out.glob("*.jsonl"))
            for doc in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def main() -> None:
    for size in SIZES:
        inputs = corpus(size)
        text_bytes = sum(p.stat().st_size for p in inputs.glob("*.jsonl"))
        buckets = max(2, size // 1_000_000 * 2)
        work = CACHE / f"paragraph-run-{size}"
        ours = run_ours(inputs, work, buckets)
        counts = ours["counts"]
        paragraphs = counts["paragraph_ngrams"]["paragraphs"]
        phases_wall = sum(ours["timing"][p] for p in PHASES)
        print(f"{paragraphs:,} paragraphs, {counts['paragraph_ngrams']['documents']:,} documents, "
              f"{counts['paragraph_ngrams']['ngrams']:,} 13-grams written "
              f"({counts['paragraph_ngrams'].get('exact_repeats', 0):,} paragraphs equal to one their element cut "
              f"before, not cut again), {text_bytes / 1e9:.2f} GB of JSONL; {buckets} buckets")
        for phase, seconds in ours["timing"].items():
            print(f"  {phase:18s} {seconds:7.1f} s   largest element's peak {ours['peaks'][phase]:,.0f} MiB")
        removal = counts["paragraph_removal"]
        print(f"  removed {removal['paragraphs_removed']:,} paragraphs ({removal['paragraphs_too_short']:,} too short "
              f"for an n-gram), {removal['documents_emptied']:,} documents, {removal['bytes_removed'] / 1e6:,.0f} MB")
        wall_rate = paragraphs / (phases_wall * 2)
        element_seconds = sum(ours["element_seconds"].values())
        ours_rate = paragraphs / element_seconds
        print(f"  ours: {ours_rate:,.0f} paragraphs/s per core: the three phases' elements, one CPU each, "
              f"{element_seconds:.1f} s in all ({', '.join(f'{p} {t:.1f}' for p, t in ours['element_seconds'].items())}); "
              f"{wall_rate:,.0f} by the wall time on 2 cores ({phases_wall:.1f} s: uneven shards and process "
              f"start-ups included)")
        if size > COMPARED_UP_TO:
            continue
        reference = reference_loop(work / "out")
        rate = reference["paragraphs"] / reference["wall"]
        print(f"  bare one-process loop (a set of n-gram hashes): {reference['wall']:.1f} s, {rate:,.0f} paragraphs/s, "
              f"peak {reference['peak']:,.0f} MiB; ours per core / loop = {ours_rate / rate:.2f}x "
              f"({wall_rate / rate:.2f}x by the wall time)")
        mine = ours_decided(work / "out")
        same = sum(mine.get(i) == text for i, text in reference["decisions"].items())
        print(f"  documents decided alike: {same:,} of {len(reference['decisions']):,} "
              f"({100 * same / len(reference['decisions']):.3f}%)")


if __name__ == "__main__":
    main()

"""JSONL → filter → Parquet, two kinds of text at two sizes: four engines side by side in one run.

1. `curator-array run` (Ray Data, private cluster; wall time including Ray start/stop),
2. the same command as of ``BASELINE``, the tree before the word count scanned bytes,
3. datatrove's LocalPipelineExecutor doing the same read/filter/write (2 workers),
4. a plain single-process pyarrow script: the bare libraries.

The same filters everywhere: non-empty text and 5..1000 whitespace-separated words. Two
kinds of input, each at about 400 MB in 48 files (where start-up weighs) and 1 GiB in 200
files (where throughput does): synthetic documents of ASCII words (3% empty, 5% of 1..4
words, the rest 20..1400 words), and documents of real multilingual text with ``url`` and a
numeric field, of long-tailed length (``real_text``), the shape web text has.
The engines take turns for 3 rounds; each line prints the median wall time and the largest
peak memory of the engine's whole process tree (Ray's processes included). datatrove is
installed into .cache/bench-site (bench only; the test venv stays clean). Prints ratios;
asserts nothing. ``--inputs real`` (or ``ascii``) runs one kind only.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_text import write_shard  # noqa: E402
from support import (  # noqa: E402
    CACHE,
    REPO,
    ROUNDS,
    baseline_tree,
    datatrove_env,
    ensure_datatrove,
    in_turns,
    timed_tree,
)

SIZES = (("400 MB", 48, 400 * 10**6), ("1 GiB", 200, 2**30))
BASELINE = "4e2c34b"
WORDS = [w for w in open(__file__).read().split() if w.isalpha()][:400] or ["word"]


def make_input(files: int, target_bytes: int) -> tuple[Path, int]:
    """The ASCII input of one size, made once (seeded) and kept in the cache; its document count."""
    directory = CACHE / f"pipeline_input_{files}x{target_bytes}"
    marker = directory / ".complete"
    if marker.exists():
        return directory, int(marker.read_text())
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = random.Random(7)
    docs = 0
    per_file = target_bytes // files
    for index in range(files):
        size = 0
        with open(directory / f"part-{index:03d}.jsonl", "w") as handle:
            while size < per_file:
                roll = rng.random()
                n = 0 if roll < 0.03 else rng.randint(1, 4) if roll < 0.08 else rng.randint(20, 1400)
                line = json.dumps({"id": f"{index}-{docs}", "text": " ".join(rng.choices(WORDS, k=n))}) + "\n"
                handle.write(line)
                size += len(line)
                docs += 1
    marker.write_text(str(docs))
    return directory, docs


DATATROVE = r"""
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.filters import LambdaFilter
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import ParquetWriter
def keep(doc):
    words = len(doc.text.split())
    return bool(doc.text.strip()) and 5 <= words <= 1000
LocalPipelineExecutor(
    pipeline=[JsonlReader(sys.argv[1], text_key="text", id_key="id", glob_pattern="*.jsonl"), LambdaFilter(keep), ParquetWriter(sys.argv[2])],
    tasks=int(sys.argv[4]), workers=2, logging_dir=sys.argv[3], skip_completed=False,
).run()
"""

PYARROW = r"""
import sys, pathlib
import pyarrow.compute as pc, pyarrow.json as pj, pyarrow.parquet as pq
out = pathlib.Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.jsonl")):
    table = pj.read_json(path)
    text = table.column("text")
    words = pc.list_value_length(pc.utf8_split_whitespace(text))
    keep = pc.and_(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0),
                   pc.and_(pc.greater_equal(words, 5), pc.less_equal(words, 1000)))
    pq.write_table(table.filter(keep), out / (path.stem + ".parquet"), compression="zstd")
"""


def make_real_input(files: int, target_bytes: int) -> tuple[Path, int]:
    directory = CACHE / f"pipeline_real_input_{files}x{target_bytes}"
    return directory, write_shard(directory, files, target_bytes)


INPUTS = {"ascii": ("ASCII words", make_input), "real": ("real multilingual text", make_real_input)}


def our_command(source: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(source), "--output-dir", str(output),
            "--output-file-type", "parquet", "--drop-empty", "--min-words", "5", "--max-words", "1000", "--no-progress"]


def run_size(kind: str, label: str, files: int, target_bytes: int) -> None:
    name, make = INPUTS[kind]
    source, docs = make(files, target_bytes)
    size_mb = sum(p.stat().st_size for p in source.glob("*.jsonl")) / 10**6
    runs = CACHE / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    print(f"\n{label} of {name}: {docs:,} documents, {size_mb:,.0f} MB of JSONL in {files} files; 2 cores")
    warm(source)
    tree = baseline_tree(BASELINE)
    commands = {
        "ours": (our_command(source, runs / "ours"), None),
        # From the old tree: a run puts its working directory first on the workers' path.
        "baseline": (our_command(source, runs / "baseline"), dict(os.environ, PYTHONPATH=str(tree)), tree),
        "datatrove": ([sys.executable, "-c", DATATROVE, str(source), str(runs / "datatrove"), str(runs / "dt-logs"),
                       str(files)], datatrove_env()),
        "pyarrow": ([sys.executable, "-c", PYARROW, str(source), str(runs / "pyarrow")], None),
    }

    def run(name: str) -> tuple[float, float]:
        for output in (runs / name, runs / "dt-logs"):  # every round starts from nothing
            shutil.rmtree(output, ignore_errors=True)
        command, env, *cwd = commands[name]
        return timed_tree(command, env, cwd=cwd[0] if cwd else REPO)

    turns = in_turns({name: partial(run, name) for name in commands})
    print(f"  median wall time of {ROUNDS} rounds in turn (" + "; ".join(
        f"{name} {turns[name]}" for name in commands) + " s), largest peak")
    (ours, baseline, datatrove, plain) = (turns[name].median for name in commands)
    (ours_peak, _, datatrove_peak, plain_peak) = (turns[name].peak for name in commands)
    manifest, before = (json.loads((runs / name / ".nemo_curator_metadata" / ".slurm_array_completion"
                                    / "completed_slurm_array_0.json").read_text()) for name in ("ours", "baseline"))
    first, last = manifest["timeline_s"]["first_result"], manifest["timeline_s"]["last_result"]
    print(f"  curator-array run      {ours:6.1f} s  {docs / ours:9,.0f} docs/s  peak {ours_peak:6,.0f} MiB"
          f"  (first result after {first:.1f} s, then {last - first:.1f} s to the last)")
    print(f"  the same at {BASELINE}    {baseline:6.1f} s  {docs / baseline:9,.0f} docs/s  ({baseline / ours:.2f}x)")
    print(f"  datatrove, 2 workers   {datatrove:6.1f} s  {docs / datatrove:9,.0f} docs/s  "
          f"peak {datatrove_peak:6,.0f} MiB")
    print(f"  pyarrow, one process   {plain:6.1f} s  {docs / plain:9,.0f} docs/s  peak {plain_peak:6,.0f} MiB")
    print(f"  ours vs datatrove {datatrove / ours:.2f}x, vs the bare libraries {plain / ours:.2f}x; "
          f"memory {ours_peak / plain_peak:.1f}x the bare libraries'")
    for who, record in (("ours", manifest), (BASELINE, before)):
        print(f"  where {who} went (CPU s / wall s / queued s):", ", ".join(
            f"{t['stage']} {t['cpu_s']:.1f}/{t['wall_s']:.1f}/{t['queued_s']:.1f}" for t in record["stages"]))
    import pyarrow.parquet as pq

    plain_rows = sum(pq.ParquetFile(path).metadata.num_rows for path in (runs / "pyarrow").glob("*.parquet"))
    print(f"  rows out: ours {manifest['rows_out']:,}, at {BASELINE} {before['rows_out']:,}, pyarrow {plain_rows:,}")
    durable, plain_write = durability_cost(runs / "ours")
    print(f"  atomic, durable outputs: writing our outputs again with fsync and rename {durable:.2f} s, plainly "
          f"{plain_write:.2f} s: {durable - plain_write:+.2f} s, {(durable - plain_write) / ours:+.1%} of our run")


def warm(directory: Path) -> None:
    """Read the input once, so that every engine finds it in the page cache, not only the later ones."""
    for path in sorted(directory.iterdir()):
        with open(path, "rb") as handle:
            while handle.read(1 << 24):
                pass


def durability_cost(outputs: Path) -> tuple[float, float]:
    """Seconds to write ``outputs``' files again as our writers do (``core.atomic.replacing``: a
    temporary name, fsync, rename, the directory synced) and plainly, file by file in turn."""
    from curator_array.core.atomic import replacing

    seconds = {True: 0.0, False: 0.0}
    for index, path in enumerate(sorted(outputs.glob("*.parquet"))):
        data = path.read_bytes()
        for fsynced in (True, False) if index % 2 == 0 else (False, True):
            target = outputs / f"copy-{fsynced}.bin"
            began = time.perf_counter()
            if fsynced:
                with replacing(target) as temporary:
                    temporary.write_bytes(data)
            else:
                target.write_bytes(data)
            seconds[fsynced] += time.perf_counter() - began
            target.unlink()
    return seconds[True], seconds[False]


def main() -> None:
    kinds = sys.argv[sys.argv.index("--inputs") + 1].split(",") if "--inputs" in sys.argv else list(INPUTS)
    ensure_datatrove()
    for kind in kinds:
        for label, files, target_bytes in SIZES:
            run_size(kind, label, files, target_bytes)


if __name__ == "__main__":
    main()

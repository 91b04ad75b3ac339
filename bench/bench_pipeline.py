"""JSONL → filter → Parquet on a 1 GB shard of synthetic documents: three engines side by side.

1. `curator-array run` (Ray Data, private cluster; wall time including Ray start/stop),
2. datatrove's LocalPipelineExecutor doing the same read/filter/write,
3. a plain single-process pyarrow script.

The same filters everywhere: non-empty text and 5..1000 whitespace-separated words.
datatrove is installed into .cache/bench-site (bench only; the test venv stays clean).
Prints docs/s and ratios; asserts nothing.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, datatrove_env, ensure_datatrove, timed  # noqa: E402

INPUT = CACHE / "pipeline_input_1g"
FILES, TARGET_BYTES = 200, 1024 * 1024 * 1024
WORDS = [w for w in open(__file__).read().split() if w.isalpha()][:400] or ["word"]


def make_input() -> int:
    marker = INPUT / ".complete"
    if marker.exists():
        return int(marker.read_text())
    shutil.rmtree(INPUT, ignore_errors=True)
    INPUT.mkdir(parents=True)
    rng = random.Random(7)
    docs = 0
    per_file = TARGET_BYTES // FILES
    for index in range(FILES):
        size = 0
        with open(INPUT / f"part-{index:03d}.jsonl", "w") as handle:
            while size < per_file:
                roll = rng.random()
                n = 0 if roll < 0.03 else rng.randint(1, 4) if roll < 0.08 else rng.randint(20, 1400)
                line = json.dumps({"id": f"{index}-{docs}", "text": " ".join(rng.choices(WORDS, k=n))}) + "\n"
                handle.write(line)
                size += len(line)
                docs += 1
    marker.write_text(str(docs))
    return docs


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
    tasks=200, workers=2, logging_dir=sys.argv[3], skip_completed=False,
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


def main() -> None:
    docs = make_input()
    size_mb = sum(p.stat().st_size for p in INPUT.glob("*.jsonl")) / 2**20
    ensure_datatrove()
    runs = CACHE / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    print(f"input: {docs:,} documents, {size_mb:.0f} MB JSONL in {FILES} files; 2 cores")

    ours = timed([sys.executable, "-m", "curator_array.cli", "run", "--input-dir", str(INPUT),
                  "--output-dir", str(runs / "ours"), "--output-file-type", "parquet", "--drop-empty",
                  "--min-words", "5", "--max-words", "1000", "--no-progress"])
    manifest = json.loads((runs / "ours" / ".nemo_curator_metadata" / ".slurm_array_completion"
                           / "completed_slurm_array_0.json").read_text())
    datatrove = timed([sys.executable, "-c", DATATROVE, str(INPUT), str(runs / "datatrove"), str(runs / "dt-logs")],
                      datatrove_env())
    plain = timed([sys.executable, "-c", PYARROW, str(INPUT), str(runs / "pyarrow")])

    sys.path.insert(0, str(REPO))
    from curator_array.execution.clients import RayClient
    from curator_array.execution.ray_cluster import NodeOptions

    client = RayClient(node_options=NodeOptions(object_store_memory=300 * 2**20))
    client.start()
    client.stop()

    print(f"curator-array run : {docs / ours:9,.0f} docs/s  ({ours:.1f}s wall incl. Ray start/stop; "
          f"pipeline alone {manifest['duration_s']:.1f}s = {docs / manifest['duration_s']:,.0f} docs/s)")
    print(f"datatrove (2 workers): {docs / datatrove:9,.0f} docs/s  ({datatrove:.1f}s)")
    print(f"plain pyarrow (1 proc): {docs / plain:9,.0f} docs/s  ({plain:.1f}s)")
    print(f"ratio curator-array / datatrove = {datatrove / ours:.2f}x   (goal >= 1.0)")
    print(f"ratio curator-array / plain pyarrow = {plain / ours:.2f}x")
    print(f"Ray init {client.startup_s:.1f}s, teardown {client.teardown_s:.1f}s (measured separately)")
    print(f"rows out: curator-array {manifest['rows_out']:,}")


if __name__ == "__main__":
    main()

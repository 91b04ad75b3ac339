"""Object stores, side by side in one run, against moto's S3 server on loopback.

1. A JSONL shard from S3 to S3 (real multilingual text, 1 GiB in 200 objects, the filters of
   ``bench_pipeline``): ``curator-array run`` against a bare pyarrow script that reads the
   same objects, filters them the same way and writes Parquet objects, in one process and
   in two (one per core).
2. The commoncrawl web chain on real pages (two WARCs of 21,100 pages each) with its outputs
   on local disk against on S3 (inputs on local disk in both).

The engines take turns for ``ROUNDS`` rounds (median wall time, largest peak of the process
tree); every round writes to a fresh prefix or directory. The store is moto, a Python server:
its own CPU is on the same two cores, and it serves both engines alike. ``PARTS=jsonl`` or
``PARTS=web`` runs one part. Prints ratios; asserts nothing.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_text import write_shard  # noqa: E402
from support import CACHE, REPO, in_turns, real_page_warcs, timed_tree  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.s3_server import S3Server  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
PARTS = os.environ.get("PARTS", "jsonl,web").split(",")
FILTERS = ["--drop-empty", "--min-words", "5", "--max-words", "1000"]

BARE = r"""
import os, sys
from multiprocessing import Pool
import pyarrow.compute as pc, pyarrow.fs as fs, pyarrow.json as pj, pyarrow.parquet as pq

def store():
    return fs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1", scheme="http",
                           endpoint_override=os.environ["AWS_ENDPOINT_URL_S3"].removeprefix("http://"))

def one(path):
    s3 = store()
    with s3.open_input_stream(path) as source:
        table = pj.read_json(source)
    text = table.column("text")
    words = pc.list_value_length(pc.utf8_split_whitespace(text))
    keep = pc.and_(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0),
                   pc.and_(pc.greater_equal(words, 5), pc.less_equal(words, 1000)))
    name = path.rsplit("/", 1)[1].removesuffix(".jsonl") + ".parquet"
    pq.write_table(table.filter(keep), f"{sys.argv[2]}/{name}", filesystem=s3, compression="zstd")
    return table.num_rows

if __name__ == "__main__":
    paths = sorted(i.path for i in store().get_file_info(fs.FileSelector(sys.argv[1])) if i.path.endswith(".jsonl"))
    processes = int(sys.argv[3])
    if processes == 1:
        print(sum(map(one, paths)))
    else:
        with Pool(processes) as pool:
            print(sum(pool.map(one, paths, chunksize=1)))
"""


def jsonl_part(server: S3Server, work: Path, env: dict[str, str]) -> None:
    source = CACHE / "pipeline_real_input_200x1073741824"
    docs = write_shard(source, 200, 2**30)
    size_mb = sum(p.stat().st_size for p in source.glob("*.jsonl")) / 10**6
    server.upload(source, "s3://bench/in")
    server.filesystem().create_dir("bench-out")
    print(f"JSONL from S3 to S3: {docs:,} documents of real multilingual text, {size_mb:,.0f} MB in 200 objects")
    rounds = itertools.count()

    def ours() -> tuple[float, float]:
        number = next(rounds)
        checkpoint = work / f"checkpoint-{number}"
        command = [sys.executable, "-m", "curator_array.cli", "run", "--input-dir", "s3://bench/in",
                   "--output-dir", f"s3://bench-out/ours-{number}", "--checkpoint-path", str(checkpoint),
                   "--output-file-type", "parquet", *FILTERS, "--no-progress"]
        measured = timed_tree(command, env)
        shutil.rmtree(checkpoint)
        return measured

    def bare(processes: int) -> tuple[float, float]:
        number = next(rounds)
        return timed_tree([sys.executable, "-c", BARE, "bench/in", f"bench-out/bare-{number}", str(processes)], env)

    engines = {"ours": ours, "bare, 1 process": partial(bare, 1), "bare, 2 processes": partial(bare, 2)}
    turns = in_turns(engines, ROUNDS)
    print(f"  median wall time of {ROUNDS} rounds in turn (" + "; ".join(
        f"{name} {turns[name]} s" for name in engines) + ")")
    for name in engines:
        wall = turns[name].median
        print(f"  {name:20s} {wall:6.1f} s  {size_mb / wall:6.1f} MB/s  {docs / wall:8,.0f} docs/s  "
              f"peak {turns[name].peak:6,.0f} MiB")
    ours_wall = turns["ours"].median
    print(f"  ours vs bare pyarrow: {turns['bare, 1 process'].median / ours_wall:.2f}x (one process), "
          f"{turns['bare, 2 processes'].median / ours_wall:.2f}x (two processes)")


def web_part(server: S3Server, work: Path, env: dict[str, str]) -> None:
    warcs, pages = real_page_warcs(2, copies=100)
    size_mb = sum(p.stat().st_size for p in warcs.glob("*.warc.gz")) / 10**6
    server.filesystem().create_dir("web-out")
    print(f"commoncrawl chain: {pages:,} real pages in 2 WARCs ({size_mb:,.0f} MB), outputs local vs on S3")
    rounds = itertools.count()
    common = ["--input-dir", str(warcs), "--input-file-type", "warc", "--pipeline", "commoncrawl", "--no-progress"]

    def run(on_store: bool) -> tuple[float, float]:
        number = next(rounds)
        local = work / f"web-{number}"
        where = (["--output-dir", f"s3://web-out/run-{number}", "--checkpoint-path", str(local)] if on_store
                 else ["--output-dir", str(local)])
        measured = timed_tree([sys.executable, "-m", "curator_array.cli", "run", *common, *where], env)
        shutil.rmtree(local)
        return measured

    engines = {"outputs on local disk": partial(run, False), "outputs on S3": partial(run, True)}
    turns = in_turns(engines, min(ROUNDS, 2))
    for name in engines:
        wall = turns[name].median
        print(f"  {name:22s} {wall:6.1f} s ({turns[name]})  {pages / wall:6,.0f} pages/s  "
              f"peak {turns[name].peak:6,.0f} MiB")
    print(f"  S3 vs local disk: {turns['outputs on local disk'].median / turns['outputs on S3'].median:.2f}x")


def main() -> None:
    server = S3Server().start()
    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    env = {**os.environ, **server.env}
    try:
        if "jsonl" in PARTS:
            jsonl_part(server, work, env)
        if "web" in PARTS:
            web_part(server, work, env)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""WARC → text, side by side in one run: curator-array's stages against datatrove's own
WarcReader and Trafilatura extractor, on the same synthetic Common Crawl-like files.

Each measurement runs in a fresh single-core process and reports documents/s, compressed
MB/s, wall time and the process's peak RSS (and its children's: datatrove's Trafilatura
extracts in a sandbox process). Then the whole `--pipeline commoncrawl` on Ray, start and
stop included, and the whole chain beside a bare loop at four sizes of these pages and two
of real ones (``support.real_page_warcs``). Last, the reader's peak memory on a 1 GB WARC.
Prints figures; asserts nothing. datatrove goes into .cache/bench-site, never into .venv.
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
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import (  # noqa: E402
    CACHE,
    REPO,
    ROUNDS,
    datatrove_env,
    datatrove_fineweb_env,
    ensure_datatrove,
    in_turns,
    measure_snippet,
    real_page_warcs,
    timed_tree,
)

sys.path.insert(0, str(REPO))
from tests.support.warcs import Page, record_bytes, write_warc  # noqa: E402

INPUT = CACHE / "warc_input"
FILES, PAGES_PER_FILE = 6, 250
BIG = CACHE / "big.warc"
WORDS = ("the of and to in is that with for as on by river valley water stone farm market city road history "
         "music garden school library bridge harbour village season weather travel kitchen recipe story").split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(8, 18))).capitalize() + "."


def page_html(rng: random.Random, title: str) -> str:
    paragraphs = "\n".join(f"<p>{' '.join(sentence(rng) for _ in range(rng.randint(2, 5)))}</p>"
                           for _ in range(rng.randint(6, 14)))
    return (f"<html><head><title>{title}</title><script>var tracking = 1;</script></head><body>"
            "<nav><a href='/'>Home</a> <a href='/about'>About</a> <a href='/shop'>Shop</a></nav>"
            "<div class='cookie-banner'>We use cookies. <button>Accept</button></div>"
            f"<main><article><h1>{title}</h1>{paragraphs}</article></main>"
            "<footer>Copyright. All rights reserved. Privacy policy.</footer></body></html>")


def input_of(files: int) -> tuple[Path, int]:
    """``files`` WARCs, copies of the main input's in turn: (directory, HTML pages)."""
    pages = make_input()[0]
    directory = CACHE / f"warc_input_{files}"
    if not (directory / ".complete").exists():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for index in range(files):
            shutil.copy(INPUT / f"crawl-{index % FILES:02d}.warc.gz", directory / f"crawl-{index:02d}.warc.gz")
        (directory / ".complete").write_text("")
    return directory, files * pages // FILES


def make_input() -> tuple[int, int]:
    """The input files, once; returns (HTML pages, uncompressed bytes)."""
    marker = INPUT / ".complete"
    if marker.exists():
        pages, raw = marker.read_text().split()
        return int(pages), int(raw)
    shutil.rmtree(INPUT, ignore_errors=True)
    INPUT.mkdir(parents=True)
    rng = random.Random(11)
    html_pages = raw = 0
    for index in range(FILES):
        pages = []
        for number in range(PAGES_PER_FILE):
            url = f"https://host{index}.example/page/{number}"
            if number % 25 == 0:
                pages.append(Page(url, bytes(rng.randrange(256) for _ in range(2000)), content_type="image/jpeg"))
            else:
                pages.append(Page(url, page_html(rng, f"Page {number}").encode()))
                html_pages += 1
        write_warc(INPUT / f"crawl-{index:02d}.warc.gz", pages)
        raw += sum(len(record_bytes(page)) for page in pages)
    marker.write_text(f"{html_pages} {raw}")
    return html_pages, raw


OURS = r"""
import sys, time, pathlib
from curator_array.formats.warc import WarcReader
from curator_array.stages.tasks import FileGroupTask
stages = []
if sys.argv[2] != "read":
    from curator_array.stages.web.extract import HtmlExtractor
    stages.append(HtmlExtractor(sys.argv[2]))
if sys.argv[3] == "all":
    from curator_array.stages.web.language import LanguageFilter
    from curator_array.stages.web.quality import GopherFilter, C4QualityFilter
    from curator_array.stages.web.fineweb_quality import FineWebQualityFilter
    stages += [LanguageFilter(), GopherFilter(), C4QualityFilter(), FineWebQualityFilter()]
for stage in stages:
    stage.setup()
timing = {"read": 0.0, **{s.stage_name: 0.0 for s in stages}}
docs = 0
reader = WarcReader()
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.warc.gz")):
    parts = reader.process(FileGroupTask(path.name, files=[str(path)]))
    while True:
        began = time.perf_counter()
        batch = next(parts, None)
        timing["read"] += time.perf_counter() - began
        if batch is None:
            break
        for stage in stages:
            began = time.perf_counter()
            batch = stage.process(batch)
            timing[stage.stage_name] += time.perf_counter() - began
        docs += batch.num_rows
REPORT = {"docs": docs, "stages": timing}
"""

DATATROVE = r"""
import sys, time
from datatrove.pipeline.readers import WarcReader
timing = {}
steps = [WarcReader(sys.argv[1], glob_pattern="*.warc.gz")]
if sys.argv[2] == "trafilatura":
    from datatrove.pipeline.extractors import Trafilatura
    steps.append(Trafilatura(favour_precision=True, timeout=10))
data = None
for step in steps:
    data = step(data, rank=0, world_size=1)
began = time.perf_counter()
docs = sum(1 for doc in data if doc.text)
REPORT = {"docs": docs, "stages": {"+".join(type(s).__name__ for s in steps): time.perf_counter() - began}}
"""

BIG_READ = r"""
import sys
from curator_array.formats.warc import WarcReader
from curator_array.stages.tasks import FileGroupTask
REPORT = {"docs": sum(p.num_rows for p in WarcReader(records_per_batch=256).process(FileGroupTask("big", files=[sys.argv[1]])))}
"""


def row(label: str, result: dict, megabytes: float) -> None:
    stages = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in result["stages"].items())
    print(f"{label:<44}{result['docs'] / result['wall']:>8,.0f} docs/s{megabytes / result['wall']:>7.1f} MB/s"
          f"{result['wall']:>7.1f}s   peak RSS {result['peak_rss'] / 2**20:>5.0f} MiB"
          f" (children {result['children_peak_rss'] / 2**20:.0f} MiB)   [{stages}]")


def run_pipeline(megabytes: float, docs: int) -> None:
    out = CACHE / "web_runs" / "ours"
    shutil.rmtree(out.parent, ignore_errors=True)
    began = time.perf_counter()
    import subprocess

    subprocess.run([sys.executable, "-m", "curator_array.cli", "run", "--pipeline", "commoncrawl", "--input-dir",
                    str(INPUT), "--input-file-type", "warc", "--output-dir", str(out), "--no-progress"],
                   check=True, cwd=REPO, capture_output=True)
    wall = time.perf_counter() - began
    import json

    manifest = json.loads((out / ".nemo_curator_metadata/.slurm_array_completion/completed_slurm_array_0.json")
                          .read_text())
    print(f"{'curator-array run --pipeline commoncrawl (Ray)':<44}{docs / wall:>8,.0f} docs/s{megabytes / wall:>7.1f} MB/s"
          f"{wall:>7.1f}s   (start and stop included; pipeline alone {manifest['duration_s']:.1f}s; "
          f"{manifest['rows_out']:,} of {manifest['rows_in']:,} documents kept)")


BARE_CHAIN = r"""
import glob, sys
from multiprocessing import Pool

STAGES = []

def one(path):
    from curator_array.pipelines.commoncrawl import build
    from curator_array.pipelines.options import PipelineOptions
    from curator_array.stages.tasks import FileGroupTask
    if not STAGES:  # once per process, as a Ray worker sets its stages up once
        STAGES.extend(build(PipelineOptions(sys.argv[1], sys.argv[2], input_file_type="warc")))
        for stage in STAGES:
            stage.setup()
    reader, *middle, writer = STAGES
    kept = 0
    for batch in reader.process(FileGroupTask(path.rsplit("/", 1)[-1], files=[path])):
        for stage in middle:
            batch = stage.process(batch)
        kept += batch.num_rows
        writer.process(batch)
    return kept

with Pool(2) as pool:
    print(sum(pool.map(one, sorted(glob.glob(sys.argv[1] + "/*.warc.gz")))))
"""


DATATROVE_CHAIN_MAX_FILES = 4 * FILES  # about 55 pages/s on 2 cores (Trafilatura): 7 minutes at 16 x FILES
DATATROVE_CHAIN = r"""
import sys
sys.path.insert(0, sys.argv[3])
from tests.support.reference_fineweb import steps
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import ParquetWriter
same_work = [step for name, step in steps() if name not in ("url_filter", "pii")]
pipeline = [WarcReader(sys.argv[1], glob_pattern="*.warc.gz"), *same_work, ParquetWriter(sys.argv[2] + "/out")]
tasks = int(sys.argv[4])
LocalPipelineExecutor(pipeline, tasks=tasks, workers=min(tasks, 2), logging_dir=sys.argv[2] + "/logs").run()
"""


class ChainInput(NamedTuple):
    label: str
    directory: Path
    files: int
    pages: int
    with_datatrove: bool


def chain_inputs(synthetic: tuple[int, ...] = (FILES, 4 * FILES, 16 * FILES, 64 * FILES),
                 real: tuple[int, ...] = (7, 28)) -> list[ChainInput]:
    """The inputs of :func:`chain_side_by_side`: the synthetic pages at four sizes, then real
    pages (Debian's documentation) at about the two smaller ones, where a page weighs what a
    crawl's does."""
    inputs = []
    for files in synthetic:
        directory, pages = input_of(files)
        inputs.append(ChainInput(f"{files} WARCs of synthetic pages", directory, files, pages,
                                 files <= DATATROVE_CHAIN_MAX_FILES))
    for files in real:
        directory, pages = real_page_warcs(files)
        inputs.append(ChainInput(f"{files} WARCs of real pages", directory, files, pages, False))
    return inputs


def chain_side_by_side() -> None:
    """The whole commoncrawl chain from start-up dominated (1,440 pages) to throughput dominated
    (92,160 pages, where Ray's start is a few per cent of the run): ``run`` (Ray,
    start and stop included) against a bare ``Pool(2)`` calling the same stages on the same
    files, with no Ray, no records; and datatrove's nearest chain on its ``LocalPipelineExecutor``
    (2 workers): its WARC reader, then FineWeb's steps from extraction to the quality rules
    (Trafilatura: datatrove 0.10 has no Resiliparse extractor), written to Parquet. Datatrove
    runs on the smaller synthetic inputs only: at about 55 pages/s it would take minutes."""
    print("\nread, extract, language, quality, Parquet on 2 cores: ours (Ray) / a bare Pool(2) of the same stages"
          " / datatrove's chain")
    reference_env = datatrove_fineweb_env(CACHE / "web_chain_reference")
    for label, directory, files, docs, with_datatrove in chain_inputs():
        runs = CACHE / "web_chain"
        env = dict(os.environ, PYTHONPATH=str(REPO))
        commands = {
            "ours": ([sys.executable, "-m", "curator_array.cli", "run", "--pipeline", "commoncrawl", "--input-dir",
                      str(directory), "--input-file-type", "warc", "--output-dir", str(runs / "ours"), "--no-progress"],
                     env),
            "bare": ([sys.executable, "-c", BARE_CHAIN, str(directory), str(runs / "bare")], env),
        }
        if with_datatrove:
            commands["datatrove"] = ([sys.executable, "-c", DATATROVE_CHAIN, str(directory), str(runs / "datatrove"),
                                      str(REPO), str(files)], reference_env)

        def run(name: str) -> tuple[float, float]:
            shutil.rmtree(runs / name, ignore_errors=True)  # every round starts from nothing
            return timed_tree(*commands[name])

        turns = in_turns({name: partial(run, name) for name in commands})
        ours, bare = turns["ours"], turns["bare"]
        manifest = json.loads((runs / "ours" / ".nemo_curator_metadata/.slurm_array_completion"
                               / "completed_slurm_array_0.json").read_text())
        print(f"  {label}, {docs:,} HTML pages, medians of {ROUNDS} rounds in turn: ours {ours.median:.1f} s "
              f"({ours} s, peak {ours.peak:,.0f} MiB), bare {bare.median:.1f} s ({bare} s, peak {bare.peak:,.0f} MiB): "
              f"ours {bare.median / ours.median:.2f}x the bare loop's speed, {ours.peak / bare.peak:.1f}x its memory")
        if "datatrove" in turns:
            theirs = turns["datatrove"]
            print(f"    datatrove {theirs.median:.1f} s ({theirs} s, peak {theirs.peak:,.0f} MiB): "
                  f"ours {theirs.median / ours.median:.2f}x its speed")
        marks = manifest["timeline_s"]
        print(f"    ours: Ray ready after {marks['ray_ready']:.1f} s, first result after "
              f"{marks['first_result']:.1f} s, last after {marks['last_result']:.1f} s")
        print("    where ours went (CPU s / wall s):", ", ".join(
            f"{t['stage']} {t['cpu_s']:.1f}/{t['wall_s']:.1f}" for t in manifest["stages"]))


def big_warc_memory() -> None:
    if not BIG.exists():
        filler = "<p>" + " ".join(WORDS * 600) + "</p>"
        html = page_html(random.Random(3), "Big").replace("</article>", filler + "</article>").encode()
        count = (1 << 30) // (len(html) + 400) + 1
        write_warc(BIG.with_suffix(".partial"), (Page(f"https://big.example/{i}", html) for i in range(count)),
                   compress=False)
        BIG.with_suffix(".partial").rename(BIG)
    result = measure_snippet(BIG_READ, str(BIG))
    print(f"\nreader on a {BIG.stat().st_size / 2**30:.2f} GiB WARC ({result['docs']:,} records, 256 per part): "
          f"peak RSS {result['peak_rss'] / 2**20:.0f} MiB, {result['wall']:.1f}s")


def main() -> None:
    docs, raw = make_input()
    megabytes = raw / 2**20
    gzipped = sum(p.stat().st_size for p in INPUT.glob("*.warc.gz")) / 2**20
    ensure_datatrove()
    print(f"input: {FILES} WARC files, {megabytes:.1f} MB of records ({gzipped:.1f} MB gzip; MB/s below count the "
          f"records), {docs:,} HTML pages (+ non-HTML records); one process each, 2 cores")
    ours_read = measure_snippet(OURS, str(INPUT), "read", "-")
    theirs_read = measure_snippet(DATATROVE, str(INPUT), "read", env=datatrove_env())
    ours_resiliparse = measure_snippet(OURS, str(INPUT), "resiliparse", "-")
    ours_trafilatura = measure_snippet(OURS, str(INPUT), "trafilatura", "-")
    theirs_trafilatura = measure_snippet(DATATROVE, str(INPUT), "trafilatura", env=datatrove_env())
    ours_all = measure_snippet(OURS, str(INPUT), "resiliparse", "all")
    row("read: curator-array WarcReader (FastWARC)", ours_read, megabytes)
    row("read: datatrove WarcReader (warcio)", theirs_read, megabytes)
    row("read+extract: curator-array + Resiliparse", ours_resiliparse, megabytes)
    row("read+extract: curator-array + Trafilatura", ours_trafilatura, megabytes)
    row("read+extract: datatrove + Trafilatura", theirs_trafilatura, megabytes)
    row("curator-array: read, extract, language, quality", ours_all, megabytes)
    print(f"ratio read, curator-array / datatrove = {theirs_read['wall'] / ours_read['wall']:.2f}x")
    print(f"ratio read+extract (Resiliparse default) / datatrove+Trafilatura = "
          f"{theirs_trafilatura['wall'] / ours_resiliparse['wall']:.2f}x")
    print(f"ratio read+extract, both with Trafilatura = {theirs_trafilatura['wall'] / ours_trafilatura['wall']:.2f}x")
    run_pipeline(megabytes, docs)
    chain_side_by_side()
    big_warc_memory()


if __name__ == "__main__":
    main()

"""Quality filters, side by side in one run: ours against datatrove's, then the commoncrawl
stage chain against the version before the FineWeb filters.

1. Gopher repetition, Gopher quality and C4 (where a language has it) on every document of
   the multilingual corpora (``tests/fixtures``), grouped by how words are split: spaced
   languages (en de es fr it pt ru nl), Japanese (SudachiPy), Chinese (jieba). Each side runs
   in a fresh single-threaded process, every rule on every document (no early exit), the
   segmenters loaded before the clock starts; ours is timed cold (nothing remembered of
   earlier batches) and warm (split chunks remembered, as in a long run); datatrove (pinned, with spaCy, SudachiPy and
   jieba) runs in its own site directory with the limits of our settings table.
2. Read → extract → language → quality on the synthetic English WARC files of
   ``bench_web.py``, in one process: this tree against ``BASELINE`` (default: the commit
   before the FineWeb filters), checked out into ``.cache/bench/baseline``.

Prints docs/s and ratios; asserts nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import REPO, baseline_tree, measure_snippet  # noqa: E402

sys.path.insert(0, str(REPO))
from bench_web import INPUT, OURS, make_input  # noqa: E402

from tests.support.reference_site import ensure_reference_site, reference_environment  # noqa: E402

CORPORA = [REPO / "tests" / "fixtures" / name for name in ("multilingual-docs.jsonl.gz", "multilingual-prose.jsonl.gz")]
GROUPS = {"spaced (en de es fr it pt ru nl)": ("en", "de", "es", "fr", "it", "pt", "ru", "nl"),
          "Japanese (SudachiPy)": ("ja",), "Chinese (jieba)": ("zh",)}
BASELINE = os.environ.get("BASELINE", "388b75d")
ROUNDS = 3

LOAD = r"""
import gzip, json, sys, time
languages = set(sys.argv[1].split(","))
docs = [json.loads(line) for path in sys.argv[2:] for line in gzip.open(path, "rt", encoding="utf-8")]
docs = [d for d in docs if d["language"] in languages]
"""

OURS_FILTERS = LOAD + r"""
import pyarrow as pa
from curator_array.stages.web.fineweb_quality import FineWebQualityFilter
from curator_array.stages.web.quality import C4QualityFilter, GopherFilter
from curator_array.text import segmenters
table = pa.table({"text": [d["text"] for d in docs], "language": [d["language"] for d in docs]})
stages = [GopherFilter(), C4QualityFilter(), FineWebQualityFilter()]
for stage in stages:
    stage.score(table.slice(0, 4), table.column("text").slice(0, 4))  # segmenters loaded
def one_pass():
    began = time.perf_counter()
    for offset in range(0, table.num_rows, 256):
        batch = table.slice(offset, 256)
        for stage in stages:
            stage.score(batch, batch.column("text"))
    return time.perf_counter() - began
cold = []
for _ in range(%d):
    segmenters._SPLIT_CHUNKS.clear()  # cold: no split chunks remembered
    cold.append(one_pass())
REPORT = {"docs": len(docs), "seconds": min(cold), "warm_seconds": one_pass()}
""" % ROUNDS

DATATROVE_FILTERS = LOAD + r"""
from datatrove.data import Document
from curator_array.stages.web.languages import language_rules
from tests.support.reference_filters import whole_filters
settings = language_rules()
filters = {code: whole_filters({**settings.get(code, settings["default"]).to_json(), "code": code}) for code in languages}
for d in docs[:4]:
    for f in filters[d["language"]]:
        f.filter(Document(text=d["text"], id=d["id"]))
best = None
for _ in range(%d):
    began = time.perf_counter()
    for d in docs:
        for f in filters[d["language"]]:
            f.filter(Document(text=d["text"], id=d["id"]))
    elapsed = time.perf_counter() - began
    best = elapsed if best is None else min(best, elapsed)
REPORT = {"docs": len(docs), "seconds": best}
""" % ROUNDS


def single_threaded(env: dict[str, str] | None = None) -> dict[str, str]:
    return dict(env or os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", ARROW_NUM_THREADS="1",
                PYTHONPATH=(env or {}).get("PYTHONPATH", str(REPO)))


def filters_side_by_side() -> None:
    ensure_reference_site()
    corpora = [str(path) for path in CORPORA]
    print("quality filters, every rule on every document, one thread each (best of 3):")
    for label, languages in GROUPS.items():
        ours = measure_snippet(OURS_FILTERS, ",".join(languages), *corpora, env=single_threaded())
        theirs = measure_snippet(DATATROVE_FILTERS, ",".join(languages), *corpora,
                                 env=single_threaded(reference_environment()))
        ours_rate, theirs_rate = ours["docs"] / ours["seconds"], theirs["docs"] / theirs["seconds"]
        warm_rate = ours["docs"] / ours["warm_seconds"]
        print(f"  {label:<34}{ours['docs']:>5} docs   curator-array {ours_rate:>6,.0f} docs/s (warm {warm_rate:>6,.0f})"
              f"   datatrove {theirs_rate:>5,.0f} docs/s   ratio {ours_rate / theirs_rate:.1f}x "
              f"(warm {warm_rate / theirs_rate:.1f}x)")




def pipeline_against_baseline() -> None:
    make_input()
    now, before = [], []
    for _ in range(ROUNDS):  # interleaved, so both see the same machine
        now.append(measure_snippet(OURS, str(INPUT), "resiliparse", "all", env=single_threaded()))
        tree = baseline_tree(BASELINE)
        before.append(measure_snippet(OURS, str(INPUT), "resiliparse", "all", cwd=tree,
                                      env=single_threaded(dict(os.environ, PYTHONPATH=str(tree)))))
    rate = max(r["docs"] / r["wall"] for r in now)
    old = max(r["docs"] / r["wall"] for r in before)
    quality = ("gopher", "c4", "fineweb")
    filters_now = min(sum(v for k, v in r["stages"].items() if k.startswith(quality)) for r in now)
    filters_before = min(sum(v for k, v in r["stages"].items() if k.startswith(quality)) for r in before)
    print(f"\nread, extract, language, quality on {INPUT.name} (one process, best of {ROUNDS}):")
    print(f"  this tree          {rate:>7,.0f} docs/s   (quality filters {filters_now:.2f}s)")
    print(f"  baseline {BASELINE:<9} {old:>7,.0f} docs/s   (quality filters {filters_before:.2f}s)")
    print(f"  ratio this tree / baseline = {rate / old:.2f}  ({(rate / old - 1) * 100:+.0f}%)")


def main() -> None:
    filters_side_by_side()
    pipeline_against_baseline()


if __name__ == "__main__":
    main()

"""Clusters over N elements in rounds (``dedup.rounds``), on ≥ 10 million documents in
clusters, side by side in one run with today's one-element clusters (``dedup.clusters``):

* one element: ``clusters.components`` over every pair, in one process;
* N = 1, 2, 4, 8 elements: every step of large-star / small-star as N processes, 2 at a
  time (the 2 cores), each holding only the edges of its partition, until a step finds the
  graph final; each element's labels are then gathered.

The graph: clusters of 2 to 100 documents joined by random trees plus 20% redundant pairs
(as LSH's bands pair the same copies several times), shuffled over 4 bucket files. Prints,
per N, the steps, the wall time, the element-seconds, the largest element's peak RSS and
edges, and checks every N labels every document as the one element does. Asserts nothing
else.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, measure_snippet  # noqa: E402

sys.path.insert(0, str(REPO))

DOCUMENTS = int(os.environ.get("COMPONENTS_DOCS", "10000000"))
ELEMENTS = [int(n) for n in os.environ.get("COMPONENTS_ELEMENTS", "1,2,4,8").split(",")]
BUCKETS, FILES, CORES = 4, 2000, 2
SIZES, WEIGHTS = [2, 3, 4, 5, 8, 20, 100], [0.5, 0.2, 0.1, 0.08, 0.07, 0.04, 0.01]
WORK = CACHE / f"components-{DOCUMENTS}"


def make_graph() -> int:
    """The bucket files (made once); returns the pairs."""
    if (WORK / ".complete").exists():
        return int((WORK / ".complete").read_text())
    from curator_array.dedup.keys import identities
    from curator_array.dedup.pairfile import write_pairs

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    rng = np.random.default_rng(7)
    rows = DOCUMENTS // FILES * 3  # documents in clusters are a third of each file
    ids = np.unique(np.concatenate([identities(f, rng.integers(0, rows, DOCUMENTS // FILES * 2))
                                    for f in range(FILES)]))
    rng.shuffle(ids)
    sizes = rng.choice(SIZES, size=DOCUMENTS // 2, p=WEIGHTS)
    sizes = sizes[:np.searchsorted(np.cumsum(sizes), min(len(ids), DOCUMENTS), side="right")]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    place = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)  # each member's place in its cluster
    member = place > 0
    parent = np.repeat(starts, sizes)[member] + (rng.random(int(member.sum())) * place[member]).astype(np.int64)
    child = np.flatnonzero(member)
    extra = rng.choice(len(child), len(child) // 5)
    cluster_of = np.repeat(np.arange(len(sizes)), sizes)
    again = np.repeat(starts, sizes)[child[extra]] + (rng.random(len(extra)) * sizes[cluster_of[child[extra]]]) \
        .astype(np.int64)
    first = ids[np.concatenate([parent, again])]
    second = ids[np.concatenate([child, child[extra]])]
    keep = first != second
    first, second = first[keep], second[keep]
    order = rng.permutation(len(first))
    for bucket, part in enumerate(np.array_split(order, BUCKETS)):
        write_pairs(WORK / f"bucket-{bucket}.pairs", first[part], second[part], None)
    (WORK / ".complete").write_text(str(len(first)))
    return len(first)


ONE_ELEMENT = r"""
import sys
from pathlib import Path
import numpy as np
from curator_array.dedup.clusters import CHUNK, components
from curator_array.dedup.pairfile import pair_chunks
paths = sorted(Path(sys.argv[1]).glob("bucket-*.pairs"))
found = components(lambda: (chunk for p in paths for chunk in pair_chunks(p, None, CHUNK)))
sizes = found.cluster_sizes()
np.savez(sys.argv[2], nodes=found.nodes, kept=found.nodes[found.roots], sizes=sizes[found.roots])
REPORT = {"documents": int(len(found.nodes))}
"""

STEP = r"""
import sys
from functools import partial
from pathlib import Path
import numpy as np
from curator_array.dedup import rounds
from curator_array.dedup.clusters import CHUNK
from curator_array.dedup.pairfile import pair_chunks
graph, work, step, element, elements = Path(sys.argv[1]), Path(sys.argv[2]), *map(int, sys.argv[3:])
paths = sorted(graph.glob("bucket-*.pairs"))
sent = [work / f"step-{step - 1}" / f"to-{element}" / f"from-{j}.pairs" for j in range(elements)]
edges = (partial(rounds.first_edges, lambda: (c for p in paths for c in pair_chunks(p, None, CHUNK)), element,
                 elements) if step == 0 else partial(rounds.step_edges, sent, None))
result = rounds.run_step(step, edges, elements,
                         lambda target: work / f"step-{step}" / f"to-{target}" / f"from-{element}.pairs", None)
if result.labels is not None:
    np.savez(work / f"labels-{step}-{element}.npz", nodes=result.labels.nodes, kept=result.labels.kept,
             sizes=result.labels.sizes)
REPORT = {"unsettled": result.unsettled, "edges_in": result.edges_in}
"""


def in_rounds(elements: int) -> dict:
    """Every step as ``elements`` processes, CORES at a time, until one finds the graph final."""
    work = WORK / f"rounds-{elements}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    began, element_seconds, peak, most_edges = time.perf_counter(), 0.0, 0.0, 0
    with ThreadPoolExecutor(CORES) as pool:
        for step in range(64):
            results = list(pool.map(lambda k: measure_snippet(STEP, str(WORK), str(work), str(step), str(k),
                                                              str(elements)), range(elements)))
            element_seconds += sum(r["wall"] for r in results)
            peak = max(peak, *(r["peak_rss"] / 2**20 for r in results))
            most_edges = max(most_edges, *(r["edges_in"] for r in results))
            shutil.rmtree(work / f"step-{step - 1}", ignore_errors=True)
            if step % 2 == 0 and sum(r["unsettled"] for r in results) == 0:
                break
    wall = time.perf_counter() - began
    parts = [np.load(work / f"labels-{step}-{k}.npz") for k in range(elements)]
    labels = {name: np.concatenate([p[name] for p in parts]) for name in ("nodes", "kept", "sizes")}
    order = np.argsort(labels["nodes"])
    shutil.rmtree(work, ignore_errors=True)
    return {"steps": step + 1, "wall": wall, "element_seconds": element_seconds, "peak": peak,
            "edges": most_edges, **{name: value[order] for name, value in labels.items()}}


def main() -> None:
    pairs = make_graph()
    reference = WORK / "one-element.npz"
    one = measure_snippet(ONE_ELEMENT, str(WORK), str(reference))
    expected = np.load(reference)
    print(f"\n{one['documents']:,} documents in clusters, {pairs:,} pairs in {BUCKETS} bucket files, {CORES} cores:")
    print(f"  one element (dedup.clusters.components)   {one['wall']:7.1f} s  peak RSS "
          f"{one['peak_rss'] / 2**20:7,.0f} MiB")
    for elements in ELEMENTS:
        got = in_rounds(elements)
        same = all(np.array_equal(got[name], expected[name]) for name in ("nodes", "kept", "sizes"))
        print(f"  {elements} element(s) in rounds: {got['steps']} steps  {got['wall']:7.1f} s "
              f"({got['element_seconds']:.1f} element-s)  largest element: peak RSS {got['peak']:7,.0f} MiB, "
              f"{got['edges']:,} edges   same clusters as one element: {same}")


if __name__ == "__main__":
    main()

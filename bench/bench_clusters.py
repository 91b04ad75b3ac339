"""The clusters element alone, on ≥ 10 million documents in clusters (synthetic pairs), side
by side in one run:

1. curator-array's clusters element now: pairs as ``uint64`` identities, connected
   components in numpy arrays, each shard's documents in clusters written out,
2. the same element as of c035345 (pairs as ``file#row`` strings, a union-find of Python
   dicts), where it fits,
3. datatrove 0.10.1's ``MinhashDedupCluster`` on the same pairs (its ``.dups`` files of
   four uint32), where it fits.

Clusters have 2 to 5 documents (each joined to its smallest member, as the buckets phase
pairs them), in random order over 4 bucket files. Prints wall time, peak RSS and bytes per
document in a cluster; checks that every tool finds the same clusters. Asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import CACHE, REPO, baseline_tree, measure_snippet  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.support.reference_site import ensure_reference_site, reference_environment  # noqa: E402

DOCUMENTS = int(os.environ.get("CLUSTERS_DOCS", "10000000"))
OLD_LIMIT = int(os.environ.get("CLUSTERS_OLD_LIMIT", "10000000"))
DATATROVE_LIMIT = int(os.environ.get("CLUSTERS_DATATROVE_LIMIT", "10000000"))
BUCKETS, FILES, SHARDS, BASELINE = 4, 2000, 100, "c035345"
WORK = CACHE / f"clusters-{DOCUMENTS}"


def make_pairs() -> int:
    """Synthetic clusters of 2-5 documents over FILES curated files; returns the pairs."""
    if not (WORK / ".complete").exists():
        shutil.rmtree(WORK, ignore_errors=True)
        write_parquet_pairs()
    import pyarrow.parquet as pq

    from curator_array.dedup.pairfile import write_pairs

    for bucket in range(BUCKETS):  # the element's own format, from the same pairs
        target = WORK / f"bucket-{bucket}.pairs"
        if not target.exists():
            table = pq.read_table(WORK / f"pairs-{bucket}.parquet")
            write_pairs(target, table["first"].to_numpy(), table["second"].to_numpy(), None)
    return int((WORK / ".complete").read_text())


def write_parquet_pairs() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    WORK.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    rows_per_file = DOCUMENTS // FILES * 3  # documents in clusters are a third of each file
    draws = DOCUMENTS * 3 // 2
    files, rows = rng.integers(0, FILES, draws), rng.integers(0, rows_per_file, draws)
    ids = np.unique((np.uint64(255) << np.uint64(56)) | (files.astype(np.uint64) << np.uint64(28))
                    | rows.astype(np.uint64))
    rng.shuffle(ids)
    ids = ids[:DOCUMENTS]
    sizes = rng.choice([2, 3, 4, 5], size=len(ids), p=[0.6, 0.25, 0.1, 0.05])
    sizes = sizes[:np.searchsorted(np.cumsum(sizes), len(ids), side="right")]
    starts = np.repeat(np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
    members = np.arange(len(starts))
    smallest = np.repeat(np.minimum.reduceat(ids[:len(starts)], np.concatenate([[0], np.cumsum(sizes)[:-1]])), sizes)
    first, second = smallest[members != starts], ids[:len(starts)][members != starts]
    second = np.where(first == second, ids[:len(starts)][starts][members != starts], second)
    order = rng.permutation(len(first))
    first, second = first[order], second[order]
    for bucket, part in enumerate(np.array_split(np.arange(len(first)), BUCKETS)):
        pq.write_table(pa.table({"first": first[part], "second": second[part]}), WORK / f"pairs-{bucket}.parquet")
    (WORK / ".complete").write_text(str(len(first)))


def write_strings() -> None:
    """The same pairs as the element of c035345 read them: ``file#row`` strings."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for bucket in range(BUCKETS):
        target = WORK / f"strings-{bucket}.parquet"
        if target.exists():
            continue
        table = pq.read_table(WORK / f"pairs-{bucket}.parquet")
        columns = {}
        for side in ("first", "second"):
            ids = table[side].to_numpy()
            files, rows = (ids >> np.uint64(28)) & np.uint64((1 << 28) - 1), ids & np.uint64((1 << 28) - 1)
            columns[side] = pa.array([f"part-{f:06d}.jsonl#{r:010d}" for f, r in zip(files.tolist(), rows.tolist())])
        pq.write_table(pa.table(columns), target)


def write_dups() -> None:
    """The same pairs as datatrove's clusters stage reads them: ``.dups`` files of four uint32."""
    import pyarrow.parquet as pq

    directory = WORK / "dups"
    if (directory / ".complete").exists():
        return
    directory.mkdir(exist_ok=True)
    mask = np.uint64((1 << 28) - 1)
    for bucket in range(14):  # its default 14 buckets; any multiple of the bucket count
        part = pq.read_table(WORK / f"pairs-{bucket % BUCKETS}.parquet") if bucket < BUCKETS else None
        records = np.zeros((0, 4), dtype="<u4")
        if part is not None:
            first, second = part["first"].to_numpy(), part["second"].to_numpy()
            records = np.stack([(first >> np.uint64(28)) & mask, first & mask, (second >> np.uint64(28)) & mask,
                                second & mask], axis=1).astype("<u4")
        (directory / f"{bucket:05d}.dups").write_bytes(records.tobytes())
    (directory / ".complete").write_text("")


OURS = r"""
import sys, time
from pathlib import Path
import numpy as np
from curator_array.core.sharding import ShardRange
from curator_array.run.phases.clusters import cluster_files, streamed_pairs
work, pairs, files, shards = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
paths = sorted(work.glob("bucket-*.pairs"))
import pyarrow as pa, pyarrow.parquet as pq  # noqa: E401 (warmed up: the libraries are not the element's work)
pq.write_table(pa.table({"id": [1]}), "/dev/null")
before = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
began = time.perf_counter()
counts = cluster_files(streamed_pairs(paths, pairs, None), pairs, np.arange(files) % shards, ShardRange(shards),
                       lambda shard: work / "ours" / f"shard_{shard}.parquet")
REPORT = {"seconds": time.perf_counter() - began, "removed": counts.removed, "clusters": counts.clusters,
          "histogram": counts.cluster_sizes, "before": before}
"""

OLD = r"""
import sys, time
from pathlib import Path
from curator_array.dedup.phases import removed_keys
paths = sorted(Path(sys.argv[1]).glob("strings-*.parquet"))
began = time.perf_counter()
removed, sizes = removed_keys(paths)
REPORT = {"seconds": time.perf_counter() - began, "removed": len(removed), "clusters": sum(sizes.values()),
          "histogram": sizes}
"""

DATATROVE = r"""
import sys, time
from datatrove.pipeline.dedup import MinhashDedupCluster
from datatrove.pipeline.dedup.minhash import MinhashConfig
dups, out = sys.argv[1:]
began = time.perf_counter()
step = MinhashDedupCluster(dups, out, config=MinhashConfig())
step.run()
REPORT = {"seconds": time.perf_counter() - began, "removed": step.stats.to_dict()["stats"]["to_remove"]}
"""




def show(label: str, result: dict, documents: int) -> None:
    peak = result["peak_rss"]
    print(f"  {label:<44}{result['seconds']:8.1f} s  peak RSS {peak / 2**20:7,.0f} MiB  "
          f"({peak / documents:5.0f} bytes per document in a cluster)")


def main() -> None:
    pairs = make_pairs()
    ours = measure_snippet(OURS, str(WORK), str(pairs), str(FILES), str(SHARDS))
    documents = pairs + ours["clusters"]
    print(f"\n{documents:,} documents in {ours['clusters']:,} clusters ({pairs:,} pairs, {BUCKETS} bucket files):")
    show("curator-array clusters element, now", ours, documents)
    grown = ours["peak_rss"] - ours["before"]
    print(f"    of which the interpreter and libraries {ours['before'] / 2**20:,.0f} MiB; the element's work "
          f"{grown / 2**20:,.0f} MiB: {grown / documents:.0f} bytes per document in a cluster")
    if documents <= OLD_LIMIT:
        write_strings()
        tree = baseline_tree(BASELINE)
        old = measure_snippet(OLD, str(WORK), env=dict(os.environ, PYTHONPATH=str(tree)), cwd=tree)
        assert (old["removed"], old["clusters"]) == (ours["removed"], ours["clusters"])
        show(f"the same element as of {BASELINE} (strings, dicts)", old, documents)
        print(f"    ratio: {old['seconds'] / ours['seconds']:.1f}x the speed, "
              f"{old['peak_rss'] / ours['peak_rss']:.1f}x less memory")
    if documents <= DATATROVE_LIMIT:
        ensure_reference_site()
        write_dups()
        shutil.rmtree(WORK / "datatrove", ignore_errors=True)
        theirs = measure_snippet(DATATROVE, str(WORK / "dups"), str(WORK / "datatrove"), env=reference_environment())
        written = sum((path.stat().st_size // 4 for path in (WORK / "datatrove").glob("*.remove")))
        assert theirs["removed"] == written == ours["removed"], (theirs["removed"], written, ours["removed"])
        show("datatrove MinhashDedupCluster", theirs, documents)
        print(f"    ratio: {theirs['seconds'] / ours['seconds']:.1f}x the speed, "
              f"{theirs['peak_rss'] / ours['peak_rss']:.1f}x less memory")


if __name__ == "__main__":
    main()

"""Clusters of duplicates from candidate pairs, as arrays: the connected components of the
pair graph, each kept as its smallest identity.

Works on pairs, not documents: memory grows with the documents that appear in a pair,
never with the corpus, and pairs are streamed (read chunk by chunk, twice), never held.
The first reading finds the distinct identities, in a few range-sorted passes; the second
turns each pair into two indices into them (``int32`` while there are fewer than 2^31).
Components are then found by hooking each edge's larger root onto its smaller one, chunk
by chunk, and jumping pointers until nothing changes: every document ends labelled with
its component's smallest index, that is its smallest identity, whatever the order pairs
arrive in. Held throughout: the identities (8 bytes a document), the labels (4) and the
index pairs (8 a pair, fewer pairs than documents in a tree of copies); everything else is
a chunk (``bench/bench_clusters.py`` measures it).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Clustering:
    """Every document of a pair (``nodes``, sorted identities) and the index of its cluster's
    smallest member (``roots``): the copy kept."""

    nodes: np.ndarray
    roots: np.ndarray

    @property
    def kept(self) -> np.ndarray:
        """Whether each node is its cluster's kept copy."""
        return self.roots == np.arange(len(self.roots), dtype=self.roots.dtype)

    def cluster_sizes(self) -> np.ndarray:
        """The size of the cluster each index roots (0 for an index that roots none), as
        ``int32``: counted over a few ranges of roots, so no array of 8 bytes a document."""
        sizes = np.zeros(len(self.roots), dtype=np.int32)
        width = -(-len(self.roots) // MOST_PASSES) or 1
        for low in range(0, len(self.roots), width):
            counted = np.zeros(width, dtype=np.int64)
            for start in range(0, len(self.roots), CHUNK):
                part = self.roots[start:start + CHUNK]
                counted += np.bincount(part[(part >= low) & (part < low + width)] - low, minlength=width)
            sizes[low:low + width] = counted[:len(sizes) - low]
        return sizes

    def kept_among(self, chosen: np.ndarray) -> int:
        """How many of the nodes that ``chosen`` (a mask) marks are their cluster's kept copy."""
        total = 0
        for start in range(0, len(self.roots), CHUNK):
            mine = chosen[start:start + CHUNK]
            here = np.arange(start, start + len(mine), dtype=self.roots.dtype)
            total += int(np.count_nonzero(self.roots[start:start + CHUNK][mine] == here[mine]))
        return total

    def size_histogram(self, sizes: np.ndarray | None = None) -> dict[int, int]:
        """How many clusters have each size (from ``cluster_sizes()``, when already known)."""
        return size_histogram(self.cluster_sizes() if sizes is None else sizes)


CHUNK = 1 << 20  # identities looked up (or grouped) at once: a fixed 25 MB of temporaries


def positions(nodes: np.ndarray, values: np.ndarray, index: type) -> np.ndarray:
    """Each value's position in the sorted ``nodes``. Looked up in sorted chunks: a search
    for keys in random order misses the cache at every step, one in order does not."""
    found = np.empty(len(values), dtype=index)
    for start in range(0, len(values), CHUNK):
        part = values[start:start + CHUNK]
        order = np.argsort(part)
        found[start:start + len(part)][order] = np.searchsorted(nodes, part[order])
    return found


def counted(values: np.ndarray, length: int = 0) -> np.ndarray:
    """``np.bincount`` of small non-negative integers, chunk by chunk: on the whole array it
    would first copy it as 8-byte integers."""
    counts = np.zeros(max(length, int(values.max()) + 1 if len(values) else 0), dtype=np.int64)
    for start in range(0, len(values), CHUNK):
        part = np.bincount(values[start:start + CHUNK])
        counts[:len(part)] += part
    return counts


def size_histogram(sizes: np.ndarray) -> dict[int, int]:
    """How many of ``sizes`` (one per cluster; 0: no cluster) have each size."""
    counts = counted(sizes)
    return {size: int(counts[size]) for size in np.flatnonzero(counts).tolist() if size > 0}


def grouped(groups: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The indices of ``groups`` (small non-negative integers) ordered by group, stable, as
    ``int32``, and where each group starts: a counting sort, chunk by chunk, so it needs no
    array of 8 bytes an item (as ``argsort`` would)."""
    sizes = counted(groups, count)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    fill = starts[:-1].copy()
    order = np.empty(len(groups), dtype=np.int32 if len(groups) < 2**31 else np.int64)
    for start in range(0, len(groups), CHUNK):
        part = groups[start:start + CHUNK]
        local = np.argsort(part, kind="stable")
        ordered = part[local]
        first = np.searchsorted(ordered, ordered, side="left")  # where each item's group begins in the chunk
        order[fill[ordered] + np.arange(len(part)) - first] = local + start
        fill += np.bincount(part, minlength=count)
    return order, starts


Pairs = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]
"""Something that reads the pairs afresh each time it is called: chunks of (first, second)."""

MOST_PASSES = 8
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
SAMPLE_EVERY = 64


def components(pairs: Pairs) -> Clustering:
    """The clusters that the pairs ``(first[i], second[i])`` join; ``pairs`` is read twice."""
    map_large_arrays_alone()
    nodes, count = distinct_identities(pairs)
    index = np.int32 if len(nodes) < 2**31 else np.int64
    a, b = np.empty(count, dtype=index), np.empty(count, dtype=index)
    filled = 0
    for first, second in pairs():
        a[filled:filled + len(first)] = positions(nodes, first, index)
        b[filled:filled + len(first)] = positions(nodes, second, index)
        filled += len(first)
    if filled != count:
        raise RuntimeError(f"the pairs changed while they were read ({count:,}, then {filled:,})")
    return Clustering(nodes, linked_roots(a, b, len(nodes), index))


def map_large_arrays_alone() -> None:
    """Have glibc map every allocation of 4 MiB or more on its own, so a freed array goes
    back to the system. Left alone, glibc raises that threshold to 32 MiB as arrays are
    freed, and the freed arrays below it stay in the heap, counted in the element's memory
    (70 MB more at the peak of 10 million documents in ``bench/bench_clusters.py``)."""
    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, 4 << 20)
    except (OSError, AttributeError):  # not glibc
        pass


def components_of(first: np.ndarray, second: np.ndarray) -> Clustering:
    """The clusters of pairs already in memory."""
    return components(lambda: [(np.asarray(first, dtype=np.uint64), np.asarray(second, dtype=np.uint64))])


def linked_roots(a: np.ndarray, b: np.ndarray, size: int, index: type) -> np.ndarray:
    """Each index's component's smallest index, for the edges ``(a[i], b[i])``."""
    roots = np.arange(size, dtype=index)
    while True:
        hooked = False
        for start in range(0, len(a), CHUNK):
            left, right = roots[a[start:start + CHUNK]], roots[b[start:start + CHUNK]]
            differ = left != right
            if differ.any():
                hooked = True
                left, right = left[differ], right[differ]
                np.minimum.at(roots, np.maximum(left, right), np.minimum(left, right))
        if not hooked:
            return roots
        while True:  # jump pointers until every index names a root
            jumped = roots[roots]
            if np.array_equal(jumped, roots):
                break
            roots = jumped


def distinct_identities(pairs: Pairs) -> tuple[np.ndarray, int]:
    """The sorted distinct identities of every pair, and the number of pairs. A first
    reading samples the identities to cut their range into parts of about equal size; each
    further pass collects and sorts one part (at most ``MOST_PASSES`` passes), so the
    temporaries are a fraction of the result."""
    samples, count = [], 0
    for first, second in pairs():
        count += len(first)
        samples += [first[::SAMPLE_EVERY], second[::SAMPLE_EVERY]]
    sample = np.sort(np.concatenate(samples)) if samples else np.empty(0, np.uint64)
    del samples
    passes = min(MOST_PASSES, max(1, -(-2 * count // (4 * CHUNK))))
    cuts = sample[(np.arange(1, passes) * len(sample)) // passes] if len(sample) else sample
    bounds = [None, *sorted_distinct(cuts), None]
    parts = []
    for low, high in zip(bounds[:-1], bounds[1:]):
        collected = []
        for first, second in pairs():
            for side in (first, second):
                inside = np.ones(len(side), dtype=bool) if low is None else side >= low
                if high is not None:
                    inside &= side < high
                collected.append(side[inside])
        parts.append(sorted_distinct(np.concatenate(collected)) if collected else np.empty(0, np.uint64))
        del collected
    nodes, filled = np.empty(sum(len(part) for part in parts), dtype=np.uint64), 0
    while parts:  # each part freed as soon as it is copied
        part = parts.pop(0)
        nodes[filled:filled + len(part)] = part
        filled += len(part)
    return nodes, count


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: ``values`` sorted in place and compacted (numpy's own
    ``unique`` hashes integers first, several times slower and larger on millions of ids)."""
    values.sort()
    distinct = np.ones(len(values), dtype=bool)
    distinct[1:] = values[1:] != values[:-1]
    return values[distinct]

"""Clusters of duplicates from candidate pairs, and the one copy each cluster keeps.

Works on pairs, not documents: memory grows with the documents that appear in a pair
(about 50 bytes each in the parent table), never with the corpus. The copy kept is the
smallest document key of its cluster, so the answer does not depend on the order pairs
arrive in, on how the run was sharded, or on retries.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


class DuplicateClusters:
    """Union-find over document keys, with path halving and the smallest key as each root."""

    def __init__(self) -> None:
        self.parent: dict[Hashable, Hashable] = {}

    def _root(self, key: Hashable) -> Hashable:
        parent = self.parent
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def join(self, first: Hashable, second: Hashable) -> None:
        for key in (first, second):
            self.parent.setdefault(key, key)
        one, other = self._root(first), self._root(second)
        if one != other:
            keep, drop = (one, other) if one < other else (other, one)
            self.parent[drop] = keep

    def join_all(self, pairs: Iterable[tuple[Hashable, Hashable]]) -> DuplicateClusters:
        for first, second in pairs:
            self.join(first, second)
        return self

    def removed(self) -> set[Hashable]:
        """Every key that is not its cluster's smallest: the copies to remove."""
        return {key for key in self.parent if self._root(key) != key}

    def sizes(self) -> dict[int, int]:
        """How many clusters have each size (for the report)."""
        members: dict[Hashable, int] = {}
        for key in self.parent:
            root = self._root(key)
            members[root] = members.get(root, 0) + 1
        histogram: dict[int, int] = {}
        for size in members.values():
            histogram[size] = histogram.get(size, 0) + 1
        return dict(sorted(histogram.items()))

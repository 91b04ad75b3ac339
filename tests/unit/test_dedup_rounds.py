"""Clusters in rounds over N elements (``dedup.rounds``) find what one element finds."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest

from curator_array.core.errors import CorruptCheckpointError
from curator_array.dedup import rounds
from curator_array.dedup.clusters import components_of

RUN = "run-rounds"


def in_rounds(first: np.ndarray, second: np.ndarray, elements: int, work: Path) -> tuple[int, rounds.Labels, list]:
    """Every step, element by element, as separate elements would run it: each reads only
    the files the previous step sent it."""
    results_by_step = []
    for step in range(200):
        results = []
        for element in range(elements):
            sent = [work / f"{step - 1}" / f"{element}" / f"{j}" for j in range(elements)]
            edges = (partial(rounds.first_edges, lambda: [(first, second)], element, elements) if step == 0
                     else partial(rounds.step_edges, sent, RUN))
            results.append(rounds.run_step(step, edges, elements,
                                           lambda target, e=element, s=step: work / f"{s}" / f"{target}" / f"{e}",
                                           RUN))
        results_by_step.append(results)
        if rounds.step_kind(step) == rounds.LARGE and sum(r.unsettled for r in results) == 0:
            parts = [r.labels for r in results]
            nodes = np.concatenate([p.nodes for p in parts])
            order = np.argsort(nodes)
            return step + 1, rounds.Labels(nodes[order], np.concatenate([p.kept for p in parts])[order],
                                           np.concatenate([p.sizes for p in parts])[order]), results_by_step
    raise AssertionError("no final step in 200")


def expected(first: np.ndarray, second: np.ndarray) -> rounds.Labels:
    found = components_of(first, second)
    sizes = found.cluster_sizes()
    return rounds.Labels(found.nodes, found.nodes[found.roots], sizes[found.roots].astype(np.int64))


def graphs(rng: np.random.Generator):
    ids = np.sort(rng.choice(2**50, 3000, replace=False)).astype(np.uint64)
    shuffled = rng.permutation(ids)
    yield "random", ids[rng.integers(0, 400, 500)], ids[rng.integers(0, 400, 500)]
    yield "long path in random order", shuffled[:-1][:600], shuffled[1:][:600]
    yield "one star", np.repeat(ids[5], 300), ids[10:310]
    clique = ids[:25]
    yield "clique", np.repeat(clique, 25), np.tile(clique, 25)
    yield "pairs twice, both ways", np.concatenate([ids[:50], ids[50:100]]), np.concatenate([ids[50:100], ids[:50]])


@pytest.mark.parametrize("elements", [1, 2, 3, 8])
def test_every_element_count_labels_each_document_with_its_clusters_smallest_identity_and_size(tmp_path, elements):
    for name, first, second in graphs(np.random.default_rng(3)):
        keep = first != second
        first, second = first[keep], second[keep]
        _, got, _ = in_rounds(first, second, elements, tmp_path / name)
        want = expected(first, second)
        for field in ("nodes", "kept", "sizes"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), (name, field)


def test_each_element_holds_its_partition_of_the_edges_only(tmp_path):
    rng = np.random.default_rng(11)
    ids = rng.choice(2**50, 20000, replace=False).astype(np.uint64)
    first, second = ids[rng.integers(0, 20000, 8000)], ids[rng.integers(0, 20000, 8000)]
    keep = first != second
    first, second = first[keep], second[keep]
    _, _, steps = in_rounds(first, second, 4, tmp_path)
    held = [r.edges_in for r in steps[0]]
    distinct = {(min(a, b), max(a, b)) for a, b in zip(first.tolist(), second.tolist())}
    assert sum(held) == 2 * len(distinct)  # every pair, both directions, once
    assert max(held) < 1.2 * sum(held) / 4


def test_a_graph_of_stars_around_their_smallest_is_final_at_once(tmp_path):
    ids = np.arange(1, 101, dtype=np.uint64)
    steps, labels, _ = in_rounds(np.repeat(ids[::10], 9), np.delete(ids, np.s_[::10]), 3, tmp_path)
    assert steps == 1
    assert np.array_equal(labels.kept, np.repeat(ids[::10], 10)) and set(labels.sizes.tolist()) == {10}


def test_no_pairs_give_no_labels_in_one_step(tmp_path):
    empty = np.empty(0, np.uint64)
    steps, labels, _ = in_rounds(empty, empty, 2, tmp_path)
    assert steps == 1 and len(labels.nodes) == 0


def test_a_truncated_step_file_is_refused_by_name(tmp_path):
    ids = np.arange(1, 50, dtype=np.uint64)
    edges = partial(rounds.first_edges, lambda: [(ids[:-1], ids[1:])], 0, 1)
    rounds.run_step(0, edges, 1, lambda _: tmp_path / "0", RUN)
    data = (tmp_path / "0").read_bytes()
    (tmp_path / "0").write_bytes(data[:-8])
    with pytest.raises(CorruptCheckpointError, match=str(tmp_path / "0")):
        rounds.step_edges([tmp_path / "0"], RUN)

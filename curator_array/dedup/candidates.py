"""Candidate pairs from band-key rows, in numpy alone: each document paired with the
smallest identity sharing one of its band keys, once. A buckets element works one band at
a time (``band_pairs``), so its sort's temporaries are one band's share, and joins the
bands' pairs at the end (``distinct_pairs``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .bandfile import BandRows


def band_pairs(ids: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of one band's rows: each member of a key's group with the group's smallest identity."""
    order = np.lexsort((ids, keys))
    keys, members = keys[order], ids[order]
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    first = members[np.maximum.accumulate(np.where(starts, np.arange(len(keys)), 0))]
    paired = first != members
    return first[paired], members[paired]


def distinct_pairs(firsts: Sequence[np.ndarray], seconds: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of every band, each once, sorted."""
    if not firsts:
        return np.empty(0, np.uint64), np.empty(0, np.uint64)
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    order = np.lexsort((second, first))
    first, second = first[order], second[order]
    distinct = np.ones(len(first), dtype=bool)
    distinct[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    return first[distinct], second[distinct]


def candidate_pairs(rows: BandRows) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of rows of any bands, band by band."""
    found = [band_pairs(rows.ids[rows.bands == band], rows.keys[rows.bands == band]) for band in np.unique(rows.bands)]
    return distinct_pairs([f for f, _ in found], [s for _, s in found])

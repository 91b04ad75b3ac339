"""Paragraph dedup's pure core: n-grams seen earlier, repeats not cut again, a batch of
documents decided at once as BFF's ``old-both`` decides each of them."""

import numpy as np
import pytest

from curator_array.dedup.paragraphs import (
    REPEATS_BUDGET,
    ExactRepeats,
    SpanRule,
    batch_ngrams,
    decide,
    seen_earlier,
)
from curator_array.dedup.settings import ParagraphSettings
from tests.support.planted_paragraphs import planted_documents

BFF = SpanRule(0.8, 0.8)


def test_a_batch_keeps_cuts_and_empties_documents_as_their_paragraphs_say():
    texts = ["kept whole\nstill kept", "première\nrépétée ici\nfin", "all seen\nagain", None]
    totals = np.array([5, 5, 10, 10, 10, 10, 10, 0], dtype=np.uint32)
    seen = np.array([4, 0, 0, 9, 0, 9, 9, 0], dtype=np.int64)  # 4/5 is not more than 0.8: kept
    batch = decide(texts, totals, seen, BFF, with_spans=True)
    assert batch.changed == {1: "première\nfin"}
    assert batch.emptied.tolist() == [False, False, True, False]
    assert batch.removed.tolist() == [0, 1, 2, 0]
    assert batch.too_short == 1 and batch.paragraphs == 8
    start = len("première".encode())
    assert batch.spans[1] == ((start, start + len("\nrépétée ici".encode())),)
    assert batch.bytes_removed == len("\nrépétée ici".encode()) + len("all seen\nagain".encode())


def test_a_document_left_with_too_few_characters_besides_whitespace_is_emptied():
    rule = SpanRule(0.0, None, min_chars=3)
    batch = decide(["a\n  x \nlong enough", "ab\n  x \nlong enough"], np.array([1, 1, 1] * 2, np.uint32), np.array([0, 0, 1] * 2), rule)
    assert batch.emptied.tolist() == [True, False] and batch.changed == {1: "ab\n  x "}


def test_totals_that_do_not_match_the_paragraphs_are_refused():
    with pytest.raises(ValueError, match="3 paragraphs, but 2"):
        decide(["a\nb", "c"], np.array([1, 1], np.uint32), np.array([0, 0]), BFF)


def seen_earlier_one_by_one(positions, keys):
    """Every occurrence of a key at a position after the first one holding it, counted per position."""
    first, later = {}, {}
    for position, key in sorted(zip(positions.tolist(), keys.tolist()), key=lambda row: row[0]):
        first.setdefault(key, position)
        if position > first[key]:
            later[position] = later.get(position, 0) + 1
    return sorted(later.items())


@pytest.mark.parametrize("seed", range(40))
def test_seen_earlier_counts_each_occurrence_after_a_keys_first_paragraph(seed):
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(0, 300))
    distinct = rng.integers(0, 2**64, int(rng.integers(1, 40)), dtype=np.uint64, endpoint=False)
    if seed % 2:  # keys alike in their high bits, differing in the low ones only
        distinct = (distinct & np.uint64(0xFF)) | np.uint64(0xABCD << 48)
    keys = rng.choice(distinct, rows)
    positions = np.sort(rng.integers(0, 50, rows).astype(np.uint64))
    cut = int(rng.integers(0, rows + 1))  # two shards' runs, the later files first
    positions, keys = np.concatenate([positions[cut:], positions[:cut]]), np.concatenate([keys[cut:], keys[:cut]])
    found, counts = seen_earlier(positions, keys)
    assert list(zip(found.tolist(), counts.tolist())) == seen_earlier_one_by_one(positions, keys)
    assert found.dtype == np.uint64 and counts.dtype == np.uint32


def seen_per_paragraph(texts, batches, settings, repeats):
    """Every paragraph's n-grams and those seen earlier, the texts cut in ``batches`` in order."""
    keys, positions, totals, repeated = [], [], [], []
    for start in range(0, len(texts), len(texts) // batches + 1):
        grams = batch_ngrams(texts[start:start + len(texts) // batches + 1], settings, repeats)
        keys.append(grams.keys)
        positions.append((grams.paragraph_of + sum(map(len, totals))).astype(np.uint64))
        totals.append(grams.totals)
        repeated.append(np.zeros(len(grams.totals), bool) if grams.repeats is None else grams.repeats)
    totals, repeated = np.concatenate(totals), np.concatenate(repeated)
    found, counts = seen_earlier(np.concatenate(positions), np.concatenate(keys))
    seen = np.zeros(len(totals), np.int64)
    seen[found.astype(np.int64)] = counts
    seen[repeated] = totals[repeated]
    return totals, seen, int(repeated.sum()), sum(map(len, keys))


@pytest.mark.parametrize("ngram,min_ngram", [(13, 13), (5, 2)])
def test_paragraphs_not_cut_again_leave_every_count_as_it_was(ngram, min_ngram):
    """A repeat's n-grams are left out and all counted seen: no paragraph's figures change."""
    settings = ParagraphSettings(ngram=ngram, min_ngram=min_ngram)
    texts = planted_documents(300, seed=7)
    plain = seen_per_paragraph(texts, 1, settings, None)
    for budget, batches in [(REPEATS_BUDGET, 1), (REPEATS_BUDGET, 7), (2_000, 5)]:
        shortcut = seen_per_paragraph(texts, batches, settings, ExactRepeats(budget))
        assert np.array_equal(shortcut[0], plain[0]) and np.array_equal(shortcut[1], plain[1])
        assert shortcut[2] > 0 and shortcut[3] < plain[3]  # some were repeats, their n-grams not written

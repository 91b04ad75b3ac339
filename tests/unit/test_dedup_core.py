"""Near-duplicate detection on planted duplicates: MinHash, LSH bands, clusters, survivors."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curator_array.dedup.clusters import DuplicateClusters
from curator_array.dedup.minhash import MinHashSettings, band_keys, signatures, simplify
from tests.support.planted import planted, sentences, vocabulary


def candidate_pairs(keys: np.ndarray) -> set[tuple[int, int]]:
    pairs = set()
    for band in range(keys.shape[1]):
        groups = defaultdict(list)
        for document, key in enumerate(keys[:, band].tolist()):
            groups[key].append(document)
        for members in groups.values():
            pairs.update((members[0], other) for other in members[1:])
    return pairs


def test_planted_duplicates_are_found_and_distinct_pages_kept():
    texts, original_of = planted()
    settings = MinHashSettings()
    rows = signatures(pa.array(texts), settings)
    assert rows.shape == (len(texts), 112) and rows.dtype == np.uint64
    clusters = DuplicateClusters().join_all(candidate_pairs(band_keys(rows, settings)))
    removed = clusters.removed()
    planted_copies = {i for i, original in enumerate(original_of) if original is not None}
    true_positive = len(removed & planted_copies)
    precision, recall = true_positive / max(1, len(removed)), true_positive / len(planted_copies)
    assert precision >= 0.99 and recall >= 0.95, (precision, recall)
    assert not removed & set(range(120)), "the originals (the smallest keys) are never removed"
    boilerplate_pages = set(range(len(texts) - 30, len(texts)))
    assert not removed & boilerplate_pages, "shared boilerplate alone does not make a duplicate"
    assert clusters.sizes() == {2: len(removed)}, "every planted copy pairs with its own original"


def test_signatures_do_not_depend_on_the_batch():
    texts, _ = planted()
    whole = signatures(pa.array(texts))
    alone = np.vstack([signatures(pa.array([text])) for text in texts[::37]])
    assert (whole[::37] == alone).all()
    other_seed = signatures(pa.array(texts[:3]), MinHashSettings(seed=2))
    assert not (other_seed == whole[:3]).any(axis=1).all()


def test_simplify_and_short_texts():
    assert simplify(pa.array(["  Héllo,  WORLD!\n 3.14 and 42 "])).to_pylist() == ["hello world 0 and 0"]
    rows = signatures(pa.array(["two words", "Two, words!", "", "other words"]))
    assert (rows[0] == rows[1]).all(), "texts shorter than an n-gram still match"
    assert (rows[2] == np.uint64((1 << 61) - 1)).all() and not (rows[0] == rows[3]).all()


def test_the_kept_copy_is_the_smallest_key_whatever_the_order():
    pairs = [("c", "b"), ("d", "c"), ("x", "y"), ("b", "a")]
    for order in (pairs, pairs[::-1], sorted(pairs)):
        clusters = DuplicateClusters().join_all(order)
        assert clusters.removed() == {"b", "c", "d", "y"}
        assert clusters.sizes() == {2: 1, 4: 1}


def dedup_in_files(tmp_path, texts, shards: int, buckets: int) -> tuple[set[str], dict[int, int]]:
    """Signatures per shard, pairs per bucket, clusters: the phases' file-level work."""
    from curator_array.formats.parquet import write_parquet
    from curator_array.run.phases.buckets import bucket_pairs
    from curator_array.run.phases.clusters import removed_keys
    from curator_array.run.phases.signatures import write_signatures

    keys = [f"part-{i % 5}.parquet#{i:05d}" for i in range(len(texts))]
    signature_files = []
    for shard in range(shards):
        mine = [i for i in range(len(texts)) if i % shards == shard]
        path = tmp_path / f"s{shards}-b{buckets}" / f"signatures-{shard}.parquet"
        write_signatures([([keys[i] for i in mine], pa.array([texts[i] for i in mine]), None)], path,
                         MinHashSettings(), buckets=buckets)
        groups = pq.ParquetFile(path).metadata
        for group in range(groups.num_row_groups):  # a bucket element reads its own row groups only
            stats = groups.row_group(group).column(3).statistics
            assert stats.min == stats.max
        signature_files.append(path)
    pair_files = []
    for bucket in range(buckets):
        path = tmp_path / f"s{shards}-b{buckets}" / f"pairs-{bucket}.parquet"
        write_parquet(bucket_pairs([(file, "") for file in signature_files], bucket, buckets)[0], path)
        pair_files.append(path)
    return removed_keys(pair_files)


def test_the_answer_does_not_depend_on_shards_or_buckets(tmp_path):
    texts, original_of = planted()
    one = dedup_in_files(tmp_path, texts, 1, 1)
    many = dedup_in_files(tmp_path, texts, 7, 3)
    assert one == many
    removed, sizes = one
    planted_copies = {f"part-{i % 5}.parquet#{i:05d}" for i, original in enumerate(original_of) if original is not None}
    assert removed == planted_copies and sizes == {2: 80}
    assert not list(tmp_path.rglob("*.tmp*")), "no partial file left behind"


def test_verification_drops_pairs_that_only_the_hashes_joined():
    from curator_array.dedup.lsh import PAIR_SCHEMA, confirmed_pairs

    rng = random.Random(2)
    words = vocabulary(rng)
    base = sentences(rng, words, 20)
    edited = base.split(" ")
    for position in range(0, len(edited), 3):  # a third of the words changed: Jaccard far below 0.75
        edited[position] = rng.choice(words)
    texts = {"a#1": base, "b#1": "  " + base.upper(), "c#1": " ".join(edited), "z#1": "from an earlier run"}
    pairs = pa.table({"first": ["a#1", "a#1", "a#1"], "second": ["b#1", "c#1", "z#1"]}, schema=PAIR_SCHEMA)
    readable = lambda keys: {k: (texts[k], ("spaced", "en")) for k in keys if not k.startswith("z")}  # noqa: E731
    fuzzy = confirmed_pairs(pairs, readable, 0.75, MinHashSettings())
    assert fuzzy["second"].to_pylist() == ["b#1", "z#1"], "a pair with an unreadable text is kept as found"
    exact = confirmed_pairs(pairs, readable, 0.75, None)
    assert exact["second"].to_pylist() == ["b#1", "z#1"]

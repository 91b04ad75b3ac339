"""Near-duplicate detection on planted duplicates: MinHash, LSH bands, clusters, survivors."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_array.dedup.clusters import components, components_of
from curator_array.dedup.keys import identities
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
    assert rows.shape == (len(texts), 112) and rows.dtype == np.uint32
    pairs = np.array(sorted(candidate_pairs(band_keys(rows, settings))), dtype=np.uint64)
    clusters = components_of(pairs[:, 0], pairs[:, 1])
    removed = set(clusters.nodes[~clusters.kept].tolist())
    planted_copies = {i for i, original in enumerate(original_of) if original is not None}
    true_positive = len(removed & planted_copies)
    precision, recall = true_positive / max(1, len(removed)), true_positive / len(planted_copies)
    assert precision >= 0.99 and recall >= 0.95, (precision, recall)
    assert not removed & set(range(120)), "the originals (the smallest keys) are never removed"
    boilerplate_pages = set(range(len(texts) - 30, len(texts)))
    assert not removed & boilerplate_pages, "shared boilerplate alone does not make a duplicate"
    assert clusters.size_histogram() == {2: len(removed)}, "every planted copy pairs with its own original"


def test_signatures_do_not_depend_on_the_batch_or_the_hashing_steps(monkeypatch):
    texts, _ = planted()
    whole = signatures(pa.array(texts))
    alone = np.vstack([signatures(pa.array([text])) for text in texts[::37]])
    assert (whole[::37] == alone).all()
    monkeypatch.setattr("curator_array.dedup.minhash.SHINGLES_PER_STEP", 97)  # many steps, some one long text
    assert (signatures(pa.array(texts)) == whole).all()
    other_seed = signatures(pa.array(texts[:3]), MinHashSettings(seed=2))
    assert not (other_seed == whole[:3]).any(axis=1).all()


def test_diacritics_are_folded_as_python_folds_them_for_every_code_point_it_knows():
    """NFD, then nonspacing marks dropped: the same as ``unicodedata`` for every code point
    assigned in Python's Unicode tables, at either end of a text and between letters."""
    import sys
    import unicodedata

    from curator_array.dedup.minhash import fold_diacritics

    known = [chr(c) for c in range(sys.maxunicode + 1)
             if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"]
    for texts in (["a" + c + "b" for c in known], [c + "e\u0301" for c in known]):
        expected = ["".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")
                    for text in texts]
        folded = fold_diacritics(pa.array(texts)).to_pylist()
        wrong = [hex(ord(text[1] if text[0] == "a" else text[0])) for text, got, want in zip(texts, folded, expected)
                 if got != want]
        assert not wrong, wrong[:10]
    assert fold_diacritics(pa.array(["Ångström", "tiếng việt", "naïve café", None])).to_pylist() == [
        "Angstrom", "tieng viet", "naive cafe", None]


def test_simplify_and_short_texts():
    assert simplify(pa.array(["  Héllo,  WORLD!\n 3.14 and 42 "])).to_pylist() == ["hello world 0 and 0"]
    rows = signatures(pa.array(["two words", "Two, words!", "", "other words"]))
    assert (rows[0] == rows[1]).all(), "texts shorter than an n-gram still match"
    assert (rows[2] == np.iinfo(np.uint32).max).all() and not (rows[0] == rows[3]).all()


def test_words_split_at_every_space_python_knows_as_the_simplified_text_does():
    """Words are found by splitting at Arrow's whitespace, skipping the whitespace pass of
    ``simplify``: the same words for every code point ``str.isspace`` calls a space."""
    from curator_array.dedup.words import words

    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    texts = [f"{space}Crème{space}{space}brûlée, 3.5 kg!{space}" for space in spaces]
    texts += ["".join(spaces) + "a" + "".join(spaces) + "b", "", None, "\u0301 lone mark", "¿Qué?—sí…"]
    flat, parents = words(pa.array(texts, pa.string()))
    found = defaultdict(list)
    for word, parent in zip(flat.to_pylist(), parents.tolist()):
        found[parent].append(word)
    expected = {i: [w for w in text.split(" ") if w] for i, text in enumerate(simplify(pa.array(texts, pa.string())).to_pylist())
                if text.strip()}
    assert dict(found) == expected
    assert found[0] == ["creme", "brulee", "0", "kg"]


def test_the_share_of_equal_minhash_values_estimates_the_jaccard_similarity():
    """Each hash function is a permutation of the shingle keys, so two documents' values are
    equal about as often as their shingle sets overlap (Jaccard), at every similarity."""
    from curator_array.dedup.minhash import jaccard, shingles

    generator = random.Random(7)
    words_ = vocabulary(generator, 2000)
    base = [generator.choice(words_) for _ in range(400)]
    texts = [" ".join(base)]
    for edits in (4, 20, 60, 120, 200, 300):
        copy = list(base)
        for position in generator.sample(range(len(copy)), edits):
            copy[position] = generator.choice(words_)
        texts.append(" ".join(copy))
    settings = MinHashSettings(bands=64, rows=8)  # 512 values: an error of about 0.02
    rows = signatures(pa.array(texts), settings)
    values, owners = shingles(pa.array(texts), settings)
    for other in range(1, len(texts)):
        truth = jaccard(values[owners == 0], values[owners == other])
        estimate = float((rows[0] == rows[other]).mean())
        assert abs(estimate - truth) < 0.07, (other, truth, estimate)


def test_jaccard_is_the_share_of_shared_shingles_with_repeats_or_without():
    from curator_array.dedup.minhash import jaccard
    from curator_array.text.ngrams import distinct

    generator = np.random.default_rng(3)
    for size in (0, 1, 50, 3000):
        first = generator.integers(0, 400, size, dtype=np.uint64)
        second = generator.integers(0, 400, size // 2 + 1, dtype=np.uint64)
        one, other = set(first.tolist()), set(second.tolist())
        truth = len(one & other) / len(one | other)
        assert jaccard(first, second) == truth
        assert jaccard(distinct(first), distinct(second), distinct_already=True) == truth
    assert jaccard(np.array([], np.uint64), np.array([], np.uint64)) == 1.0


def test_the_kept_copy_is_the_smallest_identity_whatever_the_order():
    pairs = [(3, 2), (4, 3), (24, 25), (2, 1), (90, 91), (91, 92), (92, 90)]
    for order in (pairs, pairs[::-1], sorted(pairs)):
        clusters = components_of(*(np.array(side, dtype=np.uint64) for side in zip(*order)))
        assert set(clusters.nodes[~clusters.kept].tolist()) == {2, 3, 4, 25, 91, 92}
        assert clusters.cluster_sizes()[clusters.roots][clusters.nodes.tolist().index(90)] == 3
        assert clusters.size_histogram() == {2: 1, 3: 1, 4: 1}


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_clusters_agree_with_a_plain_union_find_on_random_graphs(monkeypatch, chunk):
    """With a chunk of 7 pairs, pairs are read in many chunks and identities collected in
    several passes over ranges of files: the answer is the same."""
    import curator_array.dedup.clusters as clusters_module

    monkeypatch.setattr(clusters_module, "CHUNK", chunk)
    rng = random.Random(3)
    for _ in range(40):
        n = rng.randint(2, 200)
        pairs = [(a, b) for a, b in ((rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(1, 300))) if a != b]
        if not pairs:
            continue
        parent: dict[int, int] = {}

        def root(x: int) -> int:
            while parent.setdefault(x, x) != x:
                x = parent[x]
            return x

        for a, b in pairs:
            ra, rb = root(a), root(b)
            parent[max(ra, rb)] = min(ra, rb)

        def identity(x: int) -> int:  # spread over 13 curated files, out of order
            return int(identities((x * 5) % 13, np.array([x]))[0])

        first, second = (np.array([identity(x) for x in side], dtype=np.uint64) for side in zip(*pairs))
        chunks = [(first[i:i + 11], second[i:i + 11]) for i in range(0, len(first), 11)]
        clusters = components(lambda: iter(chunks))
        found = dict(zip(clusters.nodes.tolist(), clusters.nodes[clusters.roots].tolist()))
        smallest: dict[int, int] = {}
        for x in parent:
            smallest[root(x)] = min(smallest.get(root(x), identity(x)), identity(x))
        assert found == {identity(x): smallest[root(x)] for x in parent}


def dedup_in_files(tmp_path, texts, shards: int, buckets: int) -> tuple[set[int], dict[int, int]]:
    """Signatures per shard, pairs per bucket, clusters: the phases' file-level work."""
    from curator_array.dedup.bandfile import BandFile
    from curator_array.dedup.pairfile import write_pairs
    from curator_array.run.phases.buckets import bucket_pairs
    from curator_array.run.phases.clusters import streamed_pairs
    from curator_array.run.phases.signatures import write_signatures

    keys = np.concatenate([identities(i % 5, np.array([i])) for i in range(len(texts))])
    signature_files = []
    for shard in range(shards):
        mine = [i for i in range(len(texts)) if i % shards == shard]
        path = tmp_path / f"s{shards}-b{buckets}" / f"signatures-{shard}.bands"
        write_signatures([(keys[mine[:9]], pa.array([texts[i] for i in mine[:9]]), None),
                          (keys[mine[9:]], pa.array([texts[i] for i in mine[9:]]), None)], path,
                         MinHashSettings(), buckets=buckets)
        written = BandFile(path)
        for bucket in range(buckets):  # a bucket element reads its own rows only
            for band in range(MinHashSettings().bands):
                assert (written.share(bucket, buckets, band)[1] % np.uint64(buckets) == bucket).all()
        signature_files.append(path)
    pair_files = []
    for bucket in range(buckets):
        path = tmp_path / f"s{shards}-b{buckets}" / f"bucket-{bucket}.pairs"
        first, second = bucket_pairs([(file, None) for file in signature_files], bucket, buckets,
                                     MinHashSettings().bands)[0]
        write_pairs(path, first, second, "run-1")
        pair_files.append(path)
    total = sum((path.stat().st_size - 32) // 16 for path in pair_files)
    clusters = components(streamed_pairs(pair_files, total, "run-1"))
    return set(clusters.nodes[~clusters.kept].tolist()), clusters.size_histogram()


def test_the_answer_does_not_depend_on_shards_or_buckets(tmp_path):
    texts, original_of = planted()
    one = dedup_in_files(tmp_path, texts, 1, 1)
    many = dedup_in_files(tmp_path, texts, 7, 3)
    assert one == many
    removed, sizes = one
    planted_copies = {int(identities(i % 5, np.array([i]))[0]) for i, original in enumerate(original_of)
                      if original is not None}
    assert removed == planted_copies and sizes == {2: 80}
    assert not list(tmp_path.rglob("*.tmp*")), "no partial file left behind"


def test_verification_drops_pairs_that_only_the_hashes_joined():
    from curator_array.dedup.lsh import confirmed_pairs

    rng = random.Random(2)
    words = vocabulary(rng)
    base = sentences(rng, words, 20)
    edited = base.split(" ")
    for position in range(0, len(edited), 3):  # a third of the words changed: Jaccard far below 0.75
        edited[position] = rng.choice(words)
    texts = {1: base, 2: "  " + base.upper(), 3: " ".join(edited), 9: "from an earlier run"}
    first, second = np.array([1, 1, 1], np.uint64), np.array([2, 3, 9], np.uint64)
    readable = lambda ids: {i: (texts[i], ("spaced", "en")) for i in ids if i != 9}  # noqa: E731
    fuzzy = confirmed_pairs(first, second, readable, 0.75, MinHashSettings())
    assert fuzzy[1].tolist() == [2, 9], "a pair with an unreadable text is kept as found"
    exact = confirmed_pairs(first, second, readable, 0.75, None)
    assert exact[1].tolist() == [2, 9]


def test_a_pair_file_truncated_or_of_another_run_is_refused_by_name(tmp_path):
    from curator_array.core.errors import CorruptCheckpointError
    from curator_array.dedup.pairfile import write_pairs
    from curator_array.run.phases.clusters import streamed_pairs

    good, bad = tmp_path / "bucket_0.pairs", tmp_path / "bucket_1.pairs"
    ids = identities(0, np.arange(6))
    write_pairs(good, ids[:3], ids[3:], "run-1")
    assert components(streamed_pairs([good], 3, "run-1")).size_histogram() == {2: 3}
    write_pairs(bad, ids[:3], ids[3:], "run-2")
    with pytest.raises(CorruptCheckpointError, match=r"bucket_1.pairs: the pairs of another run \(run-2\)"):
        streamed_pairs([good, bad], 6, "run-1")
    write_pairs(bad, ids[:3], ids[3:], "run-1")
    bad.write_bytes(bad.read_bytes()[:-5])
    with pytest.raises(CorruptCheckpointError, match=r"bucket_1.pairs: .* \(truncated\?\)"):
        streamed_pairs([good, bad], 6, "run-1")
    bad.write_bytes(b"not pairs at all")
    with pytest.raises(CorruptCheckpointError, match="bucket_1.pairs: not a pair file"):
        streamed_pairs([good, bad], 6, "run-1")
    with pytest.raises(CorruptCheckpointError, match="hold 3 pairs, their manifests 4"):
        streamed_pairs([good], 4, "run-1")


def test_candidate_pairs_equal_a_plain_grouping():
    """Band by band, each document pairs with the smallest identity sharing one of its keys."""
    from curator_array.dedup.bandfile import BandRows
    from curator_array.dedup.candidates import candidate_pairs

    rng = np.random.default_rng(7)
    rows = 5000
    ids = rng.integers(0, 1500, rows).astype(np.uint64)
    band = rng.integers(0, 14, rows).astype(np.int16)
    band_key = rng.integers(0, 400, rows).astype(np.uint64)  # many shared keys, some across bands
    groups = defaultdict(set)
    for i, b, k in zip(ids.tolist(), band.tolist(), band_key.tolist()):
        groups[(b, k)].add(i)
    expected = sorted({(min(g), i) for g in groups.values() for i in g if i != min(g)})
    first, second = candidate_pairs(BandRows(ids, band, band_key))
    assert list(zip(first.tolist(), second.tolist())) == expected


def band_rows_of(seed: int, count: int, bands: int = 14):
    from curator_array.dedup.bandfile import BandRows

    rng = np.random.default_rng(seed)
    return BandRows(identities(3, np.arange(count)), np.tile(np.arange(bands, dtype=np.int16), count // bands),
                    rng.integers(0, 1 << 63, count, dtype=np.uint64))


def test_a_band_file_holds_every_bucket_and_band_across_spills(tmp_path):
    from curator_array.dedup.bandfile import BandFile, BandFileWriter

    rows = band_rows_of(1, 14 * 700)
    with BandFileWriter(tmp_path / "shard_0.bands", 3, 14, flush_rows=1000) as writer:
        for start in range(0, len(rows), 350):  # ten spills, each of every bucket and band
            writer.add(type(rows)(rows.ids[start:start + 350], rows.bands[start:start + 350],
                                  rows.keys[start:start + 350]))
    written = BandFile(tmp_path / "shard_0.bands")
    for bucket in range(3):
        for band in range(14):
            mine = (rows.keys % np.uint64(3) == bucket) & (rows.bands == band)
            ids, keys = written.share(bucket, 3, band)
            assert ids.tolist() == rows.ids[mine].tolist() and keys.tolist() == rows.keys[mine].tolist()
    assert sorted(written.share(0, 1, 5)[0].tolist()) == sorted(rows.ids[rows.bands == 5].tolist())
    assert [p.name for p in tmp_path.iterdir()] == ["shard_0.bands"], "the spill file is gone"


def test_a_band_file_truncated_or_not_one_is_refused_by_name(tmp_path):
    from curator_array.core.errors import CorruptCheckpointError
    from curator_array.dedup.bandfile import BandFile, BandFileWriter

    path = tmp_path / "shard_4.bands"
    with BandFileWriter(path, 2, 14, flush_rows=100) as writer:
        writer.add(band_rows_of(2, 280))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CorruptCheckpointError, match=r"shard_4.bands: .* \(truncated\?\): rerun its signatures"):
        BandFile(path)
    path.write_bytes(b"PAR1 and then some")
    with pytest.raises(CorruptCheckpointError, match="shard_4.bands: not a band-key file"):
        BandFile(path)
    with pytest.raises(RuntimeError), BandFileWriter(tmp_path / "shard_5.bands", 2, 14, flush_rows=100) as writer:
        writer.add(band_rows_of(3, 280))
        raise RuntimeError("killed mid-write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard_4.bands"], "nothing half-written is left"


def test_an_earlier_releases_parquet_signatures_are_read_like_band_files(tmp_path):
    """A run given with --dedup-against may hold the Parquet signature files of an earlier release."""
    from curator_array.dedup.bandfile import BandFileWriter
    from curator_array.run.phases.buckets import open_signatures

    rows = band_rows_of(4, 14 * 300)
    bucket = (rows.keys % np.uint64(4)).astype(np.int32)
    order = np.argsort(bucket, kind="stable")
    legacy = pa.table({"id": rows.ids[order], "band": rows.bands[order], "band_key": rows.keys[order],
                       "bucket": bucket[order]}).replace_schema_metadata({b"buckets": b"4"})
    pq.write_table(legacy, tmp_path / "shard_0.parquet", row_group_size=300)
    with BandFileWriter(tmp_path / "shard_0.bands", 4, 14, flush_rows=1000) as writer:
        writer.add(rows)
    for buckets, bucket in ((4, 1), (3, 2)):  # bucketed the same way, and another way
        for band in (0, 13):
            new = open_signatures(tmp_path / "shard_0.bands").share(bucket, buckets, band)
            old = open_signatures(tmp_path / "shard_0.parquet", minhash=False).share(bucket, buckets, band)
            assert sorted(zip(*(a.tolist() for a in new))) == sorted(zip(*(a.tolist() for a in old))) != []


def test_an_earlier_releases_minhash_keys_are_refused_and_its_exact_keys_read(tmp_path):
    """The MinHash hash functions changed (a * x + b mod 2^32): band keys made before cannot
    meet this release's, so a fuzzy run refuses them by name; exact keys did not change."""
    from curator_array.core.errors import CorruptCheckpointError
    from curator_array.dedup.bandfile import EARLIER_MAGIC, MAGIC, BandFile, BandFileWriter
    from curator_array.run.phases.buckets import open_signatures

    path = tmp_path / "shard_0.bands"
    with BandFileWriter(path, 2, 1, flush_rows=100) as writer:
        writer.add(band_rows_of(2, 50, bands=1))
    now = BandFile(path, minhash=False).share(1, 2, 0)
    path.write_bytes(EARLIER_MAGIC + path.read_bytes()[len(MAGIC):])
    for older in (path, tmp_path / "shard_0.parquet"):
        with pytest.raises(CorruptCheckpointError, match=f"{older.name}: its MinHash keys were made by an earlier "
                                                         "release.*: rerun its signatures element"):
            open_signatures(older)
    earlier = BandFile(path, minhash=False).share(1, 2, 0)
    assert [a.tolist() for a in earlier] == [a.tolist() for a in now] != [[], []]


def test_a_buckets_element_finds_its_pairs_without_importing_pyarrow(tmp_path):
    """pyarrow's import alone is more memory than a buckets element's work (docs/dedup.md)."""
    import subprocess
    import sys

    from curator_array.dedup.bandfile import BandFileWriter

    with BandFileWriter(tmp_path / "shard_0.bands", 2, 14, flush_rows=1000) as writer:
        writer.add(band_rows_of(5, 14 * 100))
    code = ("import sys\nfrom pathlib import Path\nfrom curator_array.run.phases.buckets import bucket_pairs\n"
            f"(first, second), held = bucket_pairs([(Path({str(tmp_path / 'shard_0.bands')!r}), None)], 1, 2, 14)\n"
            "print(held, 'pyarrow' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    held, imported = found.stdout.split()
    assert int(held) > 0 and imported == "False"


def test_small_batches_are_joined_and_the_band_file_is_the_same_bytes(tmp_path):
    """Files of a few documents each are joined into batches of at least lsh.BATCH before they
    are hashed; the band file equals the one written from the same rows in one batch, with a
    batch split by a segmenter (Japanese) among batches split at spaces."""
    import numpy as np
    import pyarrow as pa

    from curator_array.dedup.lsh import BATCH
    from curator_array.run.phases.signatures import coalesced, write_signatures

    texts = [f"document {i} has words of its own {i % 7} and some shared ones too" for i in range(2 * BATCH + 30)]
    texts[5] = "日本語の文書です。これは重複検出のための文章です。"
    split = [("spaced", "")] * len(texts)
    split[5] = ("sudachi", "ja")
    ids = np.arange(len(texts), dtype=np.uint64)
    small = [(ids[i:i + 60], pa.array(texts[i:i + 60]), split[i:i + 60] if i == 0 else None)
             for i in range(0, len(texts), 60)]
    joined = list(coalesced(iter(small)))
    assert [len(batch[0]) for batch in joined] == [1020, len(texts) - 1020]
    assert joined[0][2][5] == ("sudachi", "ja") and joined[0][2][70] == ("spaced", "") and joined[1][2] is None
    settings = MinHashSettings()
    write_signatures(iter(small), tmp_path / "small.bands", settings, buckets=3, cpus=1)
    write_signatures(iter([(ids, pa.array(texts), split)]), tmp_path / "whole.bands", settings, buckets=3, cpus=1)
    assert (tmp_path / "small.bands").read_bytes() == (tmp_path / "whole.bands").read_bytes()

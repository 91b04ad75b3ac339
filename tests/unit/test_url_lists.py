"""FineWeb's hashed URL lists (curator_array/stages/web/url_lists.py): the numbers stored and
looked up. Reading FineWeb's real lists is tests/integration/test_url_filter.py."""

from __future__ import annotations

import hashlib

import numpy as np

from curator_array.stages.web.url_lists import hashes, listed
from curator_array.text.ngrams import distinct

NAMES = ["example.com", "пример.рф", "例子.中国", "bad\udcffsurrogate.org", ""]


def test_a_hash_is_the_first_eight_bytes_of_blake2b_read_little_endian():
    expected = [int.from_bytes(hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
                for name in NAMES]
    assert hashes(NAMES).tolist() == expected and hashes(NAMES).dtype == np.uint64
    assert hashes([]).tolist() == []


def test_the_stored_list_is_sorted_and_distinct_as_np_unique_and_finds_exactly_its_entries():
    rng = np.random.default_rng(7)
    numbers = np.concatenate([rng.integers(0, 2**64 - 1, 5000, dtype=np.uint64, endpoint=True)] * 2)
    assert np.array_equal(distinct(numbers), np.unique(numbers))
    assert distinct(np.array([], dtype=np.uint64)).tolist() == []
    stored = distinct(hashes(NAMES[:3] * 2))
    assert listed(stored, NAMES).tolist() == [True, True, True, False, False]

"""URL dedup's normalisation and choice of the kept copy, without a run."""

from __future__ import annotations

import numpy as np

from curator_array.dedup.urls import losers, normalized, url_key


def test_the_copies_a_crawler_finds_of_one_page_normalise_alike():
    page = "https://www.Example.org/docs/Intro?b=2&a=1"
    same = ["http://example.org/docs/Intro?a=1&b=2", "https://EXAMPLE.org:443/docs/Intro/?b=2&a=1#top",
            "http://www.example.org:80/docs/Intro?a=1&b=2", " https://example.org/docs/Intro?b=2&a=1 "]
    assert {normalized(url) for url in [page, *same]} == {"example.org/docs/Intro?a=1&b=2"}
    others = ["https://example.org/docs/intro?a=1&b=2", "https://example.org/docs/Intro?a=1&b=3",
              "https://example.org:8080/docs/Intro?a=1&b=2", "https://docs.example.org/docs/Intro?a=1&b=2"]
    assert len({normalized(url) for url in others} | {normalized(page)}) == 5, "path case, values, ports, hosts count"
    assert url_key(page) == url_key(same[0]) and url_key(None) is None and url_key("") is None


def test_the_highest_priority_stays_and_ties_go_to_the_first():
    keys = np.array([7, 7, 7, 9, 9, 5], dtype=np.uint64)
    ids = np.array([10, 11, 12, 20, 21, 30], dtype=np.uint64)
    priorities = np.array([3, 8, 8, 4, 4, 1], dtype=np.int64)
    assert losers(keys, ids, priorities).tolist() == [10, 12, 21]
    assert losers(keys[:0], ids[:0], priorities[:0]).tolist() == []

"""The paragraph dedup's words found token by token (Arrow's whitespace split, each distinct
token cut once) are the words one boundary search over the joined paragraphs finds: the same
hashes, in the same order, as many per paragraph, for real text in ten languages and for
random strings of the characters where UAX #29's rules are subtle."""

from __future__ import annotations

import random

import numpy as np
import pytest

from curator_array.dedup import words
from curator_array.dedup.words import _word_ids_by_search, paragraph_word_ids
from tests.support.planted_paragraphs import planted_documents

SUBTLE = ["a", "b", "Z", "0", "9", " ", "  ", "\t", "\r", "\u00a0", "\u2009", "\u3000", "'", ".", ",", ":", "-", "_",
          "\u0301", "\u200d", "\u200b", "\u2060", "\u00ad", "\U0001F1E6", "\U0001F1FA", "\U0001F600", "\u2764\ufe0f",
          "\u30ab\u30ca", "\u4e2d\u6587", "\u0e01\u0e32", "\u05d0\u05f3", "\u00e9", "1,000.5", "can't", "e.g.",
          "a\u0301b", "\u0645\u0631\u062d\u0628\u0627", "\uac00\ub098"]


def same(paragraphs: list[str]) -> None:
    expected, found = _word_ids_by_search(paragraphs), paragraph_word_ids(paragraphs)
    assert np.array_equal(found[0], expected[0]) and np.array_equal(found[1], expected[1])


@pytest.mark.parametrize("known_tokens", [1 << 19, 50])
def test_token_by_token_finds_the_words_one_search_finds(monkeypatch, known_tokens):
    monkeypatch.setattr(words, "KNOWN_TOKENS", known_tokens)  # 50: the memory starts again in every batch
    monkeypatch.setattr(words, "_TOKENS", words._TokenPieces())
    paragraphs = [part for text in planted_documents(300, seed=11) for part in text.split("\n")]
    for start in range(0, len(paragraphs), 700):
        same(paragraphs[start:start + 700])
    rng = random.Random(7)
    for _ in range(40):
        same(["".join(rng.choice(SUBTLE) for _ in range(rng.randint(0, 30))) for _ in range(100)])


def test_a_paragraph_split_would_cut_elsewhere_is_searched_whole():
    """str.split() and Arrow take U+001C..U+001F for whitespace, the boundary search does not."""
    paragraphs = ["a\x1cb c", "", "d e"]
    assert paragraph_word_ids(paragraphs)[1].tolist() == [4, 0, 2]
    same(paragraphs)

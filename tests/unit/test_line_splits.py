"""Line splits: the literal fast path and the regular expression agree on every text."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc

from curator_array.stages.lines import LINE_BREAK, newline_runs, split_lines

ALPHABET = ["a", "é", "中", "\n", "\n\n", " ", "-", "...", "…", "\u0100", "\u2027", "\u20a8", "\u00c5"]
OTHER_BREAKS = ["\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def columns(alphabet: list[str], seed: int):
    rng = random.Random(seed)
    for _ in range(60):
        texts = ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) if rng.random() > 0.1 else None
                 for _ in range(rng.randint(1, 30))]
        column = pa.array(texts, pa.string())
        cut = rng.randint(0, len(texts) - 1)
        yield texts[cut:], pa.chunked_array([column.slice(cut), column.slice(cut, 3)])


def test_lines_are_split_as_the_expression_splits_them_with_and_without_other_breaks():
    for alphabet in (ALPHABET, *([*ALPHABET, other] for other in OTHER_BREAKS)):  # each break alone
        for texts, column in columns(alphabet, seed=len(alphabet)):
            expected = pc.split_pattern_regex(pc.replace_substring_regex(column, f"(?:{LINE_BREAK})$", ""),
                                              LINE_BREAK)
            assert split_lines(column).to_pylist() == expected.to_pylist(), texts


def test_newline_runs_cut_as_re_split_does():
    import re

    for alphabet in (ALPHABET, *([*ALPHABET, other] for other in OTHER_BREAKS)):
        for texts, column in columns(alphabet, seed=len(alphabet) + 1):
            expected = [None if t is None else re.split(r"\n+", t) for t in texts + texts[:3]]
            assert newline_runs(column).to_pylist() == expected, texts


def test_every_break_python_knows_splits_a_line():
    breaks = [c for c in map(chr, range(0x3000)) if len(("a" + c + "b").splitlines()) == 2]
    assert sorted(breaks) == sorted(["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
    got = split_lines(pa.array(["a" + c + "b" for c in breaks] + ["a\r\nb\r\n", "x\u2028"])).to_pylist()
    assert got == [["a", "b"]] * len(breaks) + [["a", "b"], ["x"]]

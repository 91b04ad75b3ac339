"""Every text primitive on ASCII and on other real text, side by side with its equivalent.

Real text is seldom pure ASCII, so a primitive that is fast only on ASCII is slow where it
matters. Each row times one primitive of ours and its plain pyarrow or Python equivalent on
two inputs, cut from one sample of real documents (``real_text``): the
documents that are pure ASCII and the others (24 languages, CJK among them). The primitives are the ones on the path of every document: the word count
(``stages.whitespace``), the Gopher filters' word split (``textstats.batch_words``) and
line splits (``stages.lines``), and dedup's text normalisation (``minhash.simplify``).
The Gopher word split runs cold (its memory of split chunks emptied
before each run) on the documents of spaced scripts (Chinese, Japanese and Korean go to
their segmenters). What changed is also timed as it was at ``BASELINE``: the word count (an ASCII byte scan and
a regular expression for every other row), the line splits (regular expressions) and the
normalisation (a Python loop over every row that is not ASCII). The ASCII
documents are fewer (about 8 MB, Python's docs and English man pages) than the others
(40 MB); rates are MB/s, so the two columns compare. Best of 3 runs; asserts nothing.
"""

from __future__ import annotations

import json
import re
import sys
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from real_text import write_shard  # noqa: E402
from support import CACHE, REPO, baseline_module  # noqa: E402

sys.path.insert(0, str(REPO))
from curator_array.dedup.minhash import simplify  # noqa: E402
from curator_array.stages.lines import LINE_BREAK, newline_runs, split_lines  # noqa: E402
from curator_array.stages.web.textstats import batch_words, flatten_words  # noqa: E402
from curator_array.stages.whitespace import count_words  # noqa: E402
from curator_array.text.segmenters import _SPLIT_CHUNKS, spaced  # noqa: E402

BASELINE = "4e2c34b"  # the word count before it scanned every row's bytes
SIZE_BYTES = 40 * 10**6


def inputs() -> dict[str, pa.Array]:
    """ASCII and other documents of real text, about SIZE_BYTES of each."""
    directory = CACHE / "text_primitives_input"
    write_shard(directory, 4, 6 * SIZE_BYTES, seed=5)
    picked: dict[bool, list[str]] = {True: [], False: []}
    size = {True: 0, False: 0}
    for path in sorted(directory.glob("*.jsonl")):
        for line in open(path, encoding="utf-8"):
            text = json.loads(line)["text"]
            if text and size[text.isascii()] < SIZE_BYTES:
                picked[text.isascii()].append(text)
                size[text.isascii()] += len(text.encode())
    return {"ASCII": pa.array(picked[True]), "other": pa.array(picked[False])}


def best(function, text: pa.Array) -> float:
    times = []
    for _ in range(3):
        began = time.perf_counter()
        function(text)
        times.append(time.perf_counter() - began)
    return min(times)


def python_fold(text: pa.Array) -> list[str]:
    return ["".join(c for c in unicodedata.normalize("NFD", t) if unicodedata.category(c) != "Mn")
            for t in text.to_pylist()]


def english_words(text: pa.Array):
    _SPLIT_CHUNKS.clear()  # each run cold: the chunks a worker has split before are not this text's
    return batch_words(text, ["en"] * len(text), ["spaced"] * len(text))


def english_words_per_document(text: pa.Array):
    """The same words, document by document, as one Arrow array with each word's document (what the rules read)."""
    _SPLIT_CHUNKS.clear()
    return flatten_words([spaced(s, "en") for s in text.to_pylist()])


def spaced_scripts(text: pa.Array) -> pa.Array:
    """The documents a spaced-language splitter gets: Chinese, Japanese and Korean go to their segmenters."""
    return text.filter(pc.invert(pc.match_substring_regex(text, r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")))


def regex_lines(text: pa.Array):
    return pc.split_pattern_regex(pc.replace_substring_regex(text, f"(?:{LINE_BREAK})$", ""), LINE_BREAK)


def primitives() -> list[tuple]:
    """(primitive, ours now, ours at BASELINE or None, the equivalent's name, the equivalent[, the
    documents of an input it takes])."""
    before_words = baseline_module(BASELINE, "stages.whitespace").count_words
    before_simplify = baseline_module(BASELINE, "dedup.minhash").simplify
    return [
        ("count_words", count_words, before_words, "utf8_split_whitespace + list_value_length",
         lambda t: pc.list_value_length(pc.utf8_split_whitespace(t))),
        ("count_words", count_words, None, "Python len(t.split())", lambda t: [len(s.split()) for s in t.to_pylist()]),
        ("batch_words (Gopher)", english_words, None, "spaced(t) per document, then flattened", english_words_per_document,
         spaced_scripts),
        ("split_lines (Gopher)", split_lines, regex_lines, "Python t.splitlines()",
         lambda t: [s.splitlines() for s in t.to_pylist()]),
        ("newline_runs (Gopher)", newline_runs, lambda t: pc.split_pattern_regex(t, r"\n+"),
         "Python re.split(r'\\n+', t)", lambda t: [re.split(r"\n+", s) for s in t.to_pylist()]),
        ("simplify (dedup)", simplify, before_simplify, "Python NFD fold alone", python_fold),
    ]


def main() -> None:
    texts = inputs()
    for name, text in texts.items():
        print(f"{name}: {len(text):,} documents, {pc.sum(pc.binary_length(text)).as_py() / 1e6:.0f} MB")
    print(f"\nMB/s, best of 3: ours now / ours at {BASELINE} / the equivalent, and now against the equivalent")
    print(f"{'primitive':22} {'equivalent':42} {'ASCII':>28} {'other':>28}")
    for label, now, before, other_name, other, *taken in primitives():
        cells = []
        for text in texts.values():
            text = taken[0](text) if taken else text
            megabytes = pc.sum(pc.binary_length(text)).as_py() / 1e6
            mine, theirs = best(now, text), best(other, text)
            then = f"{megabytes / best(before, text):5.0f}" if before else "    -"
            cells.append(f"{megabytes / mine:5.0f} / {then} / {megabytes / theirs:5.0f} {theirs / mine:5.2f}x")
        print(f"{label:22} {other_name:42} {cells[0]:>28} {cells[1]:>28}")


if __name__ == "__main__":
    main()

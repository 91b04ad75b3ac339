"""Eval sets and a corpus with planted contamination, from the multilingual fixtures.

The eval records are English paragraphs cut into a query (the first words) and an answer
(the words after them). The corpus holds clean documents (paragraphs of other languages,
and English ones no eval record came from) and documents with something planted in them,
each labelled with what was planted:

- ``verbatim``: an answer as it is;
- ``punctuation``: an answer upper-cased, with its punctuation changed;
- ``straddle``: the end of a query and the start of its answer, no n-gram of either alone;
- ``near_miss``: an answer with every ``NEAR_MISS_EVERY``-th word replaced, so no n-gram of
  it survives;
- ``short``: a short eval text (indexed whole by default);
- ``numbers``: an eval text of numbers only (never indexed by default);
- ``raw``: an eval text as the manuals write it (punctuation, contractions, numbers, code).
"""

from __future__ import annotations

import itertools
import random
import re

from tests.support.quality_corpus import paragraphs

QUERY_WORDS, ANSWER_WORDS = 12, 30
NEAR_MISS_EVERY = 3
PLAIN_WORD = re.compile(r"^[A-Za-z]+[.,;:!?]?$")  # one word after simplification, whatever the language
TASKS = ("manual_qa", "manual_reading")
SHORT_TASK, NUMBERS_TASK, RAW_TASK = "short_answers", "numbers", "manual_raw"
KINDS = ("verbatim", "punctuation", "straddle", "near_miss", "short", "numbers", "raw")
RAW_RECORDS = 12


def eval_and_corpus(eval_records: int = 60, clean: int = 300, seed: int = 7, straddle: int = 13,
                    hosts_language: str | None = None) -> tuple[list[dict], list[dict]]:
    """The eval records (``text``, ``query``, ``task``) and the corpus (``id``, ``text``,
    ``planted``: a kind of ``KINDS`` or None; ``task``: the task planted). ``straddle``: the
    words of a straddle (n, so that only n-grams across query and answer see it).
    ``hosts_language``: the language of the documents things are planted in (default: any
    but English)."""
    rng = random.Random(seed)
    documents = paragraphs()
    english = [d for d in documents if d["language"] == "en"
               and len(plain_words(d["text"])) >= QUERY_WORDS + ANSWER_WORDS]
    sources, rest = english[:eval_records], english[eval_records:]
    records = []
    for number, source in enumerate(sources):
        words = plain_words(source["text"])
        records.append({"query": " ".join(words[:QUERY_WORDS]),
                        "text": " ".join(words[QUERY_WORDS:QUERY_WORDS + ANSWER_WORDS]),
                        "task": TASKS[number % 2]})
    short_texts = [" ".join(plain_words(d["text"])[:10]) for d in rest[-6:]]
    raw = [d for d in documents if d["language"] == "en" and len(d["text"].split()) >= 40 and d not in sources
           and d not in rest[-6:]][-RAW_RECORDS:]
    records += [{"text": " ".join(d["text"].split()[:40]), "task": RAW_TASK} for d in raw]
    records += [{"text": text, "task": SHORT_TASK} for text in short_texts]
    records.append({"text": "a b c", "task": SHORT_TASK})  # under 8 words: skipped, counted
    numbers = " ".join(str(rng.randrange(10, 10_000)) for _ in range(20))
    records.append({"text": numbers, "task": NUMBERS_TASK})
    seen = {gram for source in [*sources, *raw] for gram in grams(source["text"])}
    hosts = [d for d in documents if (d["language"] == hosts_language if hosts_language
                                      else d["language"] not in ("en", "nl")) and len(d["text"]) >= 200
             and not grams(d["text"]) & seen]  # no paragraph left untranslated from an eval source
    rng.shuffle(hosts)
    corpus = [{"id": f"clean-{i}", "text": d["text"], "planted": None, "task": None} for i, d in enumerate(hosts[:clean])]
    corpus += [{"id": f"clean-en-{i}", "text": d["text"], "planted": None, "task": None}
               for i, d in enumerate([d for d in rest[:-6] if not grams(d["text"]) & seen][:clean // 3])]
    planted_hosts = itertools.cycle(hosts[clean:] or hosts)  # a host may take several plants, one at a time

    def plant(kind: str, task: str, words: str) -> None:
        host = next(planted_hosts)["text"]
        cut = len(host) // 2
        corpus.append({"id": f"{kind}-{len(corpus)}", "text": f"{host[:cut]} {words} {host[cut:]}", "planted": kind,
                       "task": task})

    for record in records[:eval_records]:
        answer, query = record["text"].split(), record["query"].split()
        plant("verbatim", record["task"], record["text"])
        plant("punctuation", record["task"], "; ".join(", ".join(answer[i:i + 4]).upper()
                                                       for i in range(0, len(answer), 4)) + "!")
        half = straddle // 2
        plant("straddle", record["task"], " ".join(query[-half:] + answer[:straddle - half]))
        missed = [f"zq{i}x" if i % NEAR_MISS_EVERY == NEAR_MISS_EVERY - 1 else word for i, word in enumerate(answer)]
        plant("near_miss", record["task"], " ".join(missed))
    for text in short_texts:
        plant("short", SHORT_TASK, text)
    for record in records:
        if record["task"] == RAW_TASK:
            plant("raw", RAW_TASK, record["text"])
    plant("numbers", NUMBERS_TASK, numbers)
    rng.shuffle(corpus)
    return records, corpus


def plain_words(text: str) -> list[str]:
    """The words of ``text`` that simplification keeps as one word each (a planted n-gram of
    them is an n-gram of the document)."""
    return [word for word in text.split() if PLAIN_WORD.match(word)]


def grams(text: str, n: int = 6) -> set[tuple[str, ...]]:
    words = [word.strip(".,;:!?()").lower() for word in text.split()]
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def expected_hits(corpus: list[dict], overlap: bool) -> dict[str, str | None]:
    """The task each document should hit, by id (None: none): the straddles only with
    ``overlap``; the numbers only as datatrove indexes (``overlap``); short texts only by
    default; near misses and clean documents never."""
    caught = {"verbatim", "punctuation", "raw", *(("straddle", "numbers") if overlap else ("short",))}
    return {d["id"]: d["task"] if d["planted"] in caught else None for d in corpus}

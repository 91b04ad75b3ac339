"""The quality filters decide as their reference does, rule by rule, in every language.

The corpus is real prose: 831 sections of Debian's translated manuals in nine languages
(``tests/fixtures/multilingual-docs.jsonl.gz``, built by ``tests/support/build_text_corpus.py``).
datatrove's filters, with spaCy, SudachiPy and jieba (pinned, installed apart from ours by
``tests/support/reference_site.py``), decide every rule on every section with the limits of our
settings table (``tests/support/reference_filters.py``); ours decide the same sections.

Every rule agrees on at least 97% of the sections of every language (FineWeb's
``list_ratio`` compared where the line rules before it keep the section: only there are
words counted). The PII formatter replaces the same addresses in all sections, 152 of which
hold one. The disagreements
left, each one section, and why:

* fr ``alphabetic_words``: spaCy's French keeps ``libc6-dev`` one word (a digit before the
  hyphen); ours splits it, moving the share of words with a letter across the limit
  (0.810 against 0.815, limit 0.812).
* pt ``alphabetic_words``: spaCy's Portuguese splits a leading ``--`` off command options
  (``--gen-key`` → ``--``, ``gen-key``), adding 14 words without letters; ours keeps them whole.
* pt ``duplicate_6gram`` and ``duplicate_10gram``: one section where a URL is followed by
  ``.`` or ``"`` and ``p.e.`` is an abbreviation; the words differ around them, and with
  them the n-grams.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pytest

from curator_array.stages.web.fineweb_quality import FineWebQualityFilter
from curator_array.stages.web.languages import language_rules
from curator_array.stages.web.pii import anonymised
from curator_array.stages.web.quality import (
    C4QualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from tests.conftest import REPO
from tests.support.build_text_corpus import ALWAYS_KEPT
from tests.support.reference_site import (
    ensure_reference_site,
    reference_environment,
    reference_output,
)

CORPUS = REPO / "tests" / "fixtures" / "multilingual-docs.jsonl.gz"
LEAST_AGREEMENT = 0.97


def documents() -> list[dict]:
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def reference_site():
    try:
        return ensure_reference_site()
    except RuntimeError as problem:
        if os.environ.get("CI") == "true":
            pytest.fail(str(problem))
        pytest.skip(str(problem))


@pytest.fixture(scope="module")
def reference(reference_site, tmp_path_factory) -> dict[str, dict]:
    """Per section id: the reference's decision for every rule."""
    codes = sorted({doc["language"] for doc in documents()})
    settings = tmp_path_factory.mktemp("reference") / "settings.json"
    table = language_rules()
    settings.write_text(json.dumps({code: table[code].to_json() for code in codes}))
    printed = reference_output([sys.executable, str(REPO / "tests" / "support" / "reference_filters.py"), str(CORPUS),
                                str(settings)], reference_environment())
    return {row["id"]: row for row in json.loads(printed)}


@pytest.fixture(scope="module")
def ours() -> tuple[list[dict], dict[str, np.ndarray], list[str]]:
    """Our decision per rule (named as the reference runner names them) and C4's cleaned texts."""
    docs = documents()
    table = pa.table({"text": [d["text"] for d in docs], "language": [d["language"] for d in docs]})
    decisions: dict[str, np.ndarray] = {}
    cleaned: list[str] = []
    for stage in (GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter()):
        scored, masks = stage.score(table, table.column("text"))
        masks = {rule: np.asarray(mask.to_numpy(zero_copy_only=False)) for rule, mask in masks.items()}
        if stage.name == "gopher_quality":  # the reference holds both to one limit
            masks["symbol_ratio"] = masks.pop("hash_ratio") & masks.pop("ellipsis_ratio")
        if stage.name == "c4_quality":
            decisions["c4_quality"] = np.logical_and.reduce(list(masks.values()))
            cleaned = scored.column("text").to_pylist()
            continue
        if stage.name == "fineweb_quality":  # words are counted only for pages the line rules kept
            earlier = np.logical_and.reduce([masks[rule] for rule in masks if rule != "list_ratio"])
            masks["list_ratio"] = np.where(earlier, masks["list_ratio"], None)
        decisions.update({f"{stage.name}.{rule}": mask for rule, mask in masks.items()})
    return docs, decisions, cleaned


def test_every_rule_agrees_with_the_reference_in_every_language(reference, ours):
    docs, decisions, _ = ours
    agree: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    for index, doc in enumerate(docs):
        theirs = reference[doc["id"]]
        for rule, mask in decisions.items():
            if rule in theirs and mask[index] is not None:
                counts = agree[doc["language"], rule]
                counts[0] += bool(mask[index]) == theirs[rule]
                counts[1] += 1
    languages = {language for language, _ in agree}
    assert languages == {"en", "de", "fr", "es", "it", "pt", "ru", "ja", "zh"}
    assert len({rule for _, rule in agree}) >= 18, "every rule was compared"
    below = {f"{language} {rule}": f"{same}/{total}" for (language, rule), (same, total) in sorted(agree.items())
             if same < LEAST_AGREEMENT * total}
    assert not below, f"rules agreeing with datatrove on fewer than {LEAST_AGREEMENT:.0%} of sections: {below}"


def test_the_whole_decision_agrees_in_every_language(reference, ours):
    """Every rule at once, as FineWeb-2 runs them per language: the same pages kept. The
    sections our segmenter once split differently from spaCy (German stops after numbers and
    abbreviations, URLs' final slashes, emoticons) are in the corpus and decide as the reference."""
    docs, decisions, _ = ours
    same: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    differing = []
    for index, doc in enumerate(docs):
        theirs = reference[doc["id"]]
        rules = [rule for rule, mask in decisions.items() if rule in theirs and rule != "c4_quality"
                 and mask[index] is not None]
        agreed = all(bool(decisions[rule][index]) for rule in rules) == all(theirs[rule] for rule in rules)
        same[doc["language"]][0] += agreed
        same[doc["language"]][1] += 1
        if not agreed:
            differing.append(doc["id"])
    assert not [doc for doc in differing if doc in ALWAYS_KEPT]
    assert same["de"] == [same["de"][1], same["de"][1]], f"German sections decided differently: {differing}"
    below = {language: f"{agreed}/{total}" for language, (agreed, total) in same.items()
             if agreed < LEAST_AGREEMENT * total}
    assert not below, f"whole decisions agreeing on fewer than {LEAST_AGREEMENT:.0%}: {below}"


def test_c4_keeps_the_same_pages_and_lines_as_the_reference(reference, ours):
    docs, decisions, cleaned = ours
    english = [i for i, doc in enumerate(docs) if "c4_quality" in reference[doc["id"]]]
    assert len(english) == 90 and {docs[i]["language"] for i in english} == {"en"}, "C4 runs for English only"
    kept_differently = [docs[i]["id"] for i in english if bool(decisions["c4_quality"][i]) !=
                        reference[docs[i]["id"]]["c4_quality"]]
    assert not kept_differently
    both_kept = [i for i in english if reference[docs[i]["id"]]["c4_quality"]]
    assert both_kept, "some English pages pass C4"
    assert [docs[i]["id"] for i in both_kept if cleaned[i] != reference[docs[i]["id"]]["c4_text"]] == []


def test_pii_replaces_what_the_reference_replaces(reference_site):
    """Each section through datatrove's PIIFormatter (a fresh one per section: ours restarts
    its turn of placeholders with every document) and through ours: the same text."""
    script = ("import gzip, json, sys\n"
              "from datatrove.pipeline.formatters import PIIFormatter\n"
              "with gzip.open(sys.argv[1], 'rt', encoding='utf-8') as lines:\n"
              "    json.dump([PIIFormatter().format(json.loads(line)['text']) for line in lines], sys.stdout)\n")
    theirs = json.loads(reference_output([sys.executable, "-c", script, str(CORPUS)], reference_environment()))
    texts = [doc["text"] for doc in documents()]
    ours = [anonymised(text) for text in texts]
    changed = sum(new != old for new, old in zip(theirs, texts))
    assert changed >= 5, "the corpus holds addresses to replace"
    assert [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b] == []

"""Near copies in every language: shingles made of the words of each document's language,
split by the segmenters the quality filters use (SudachiPy for Japanese, jieba for Chinese).
Planted copies of real Japanese and Chinese prose (exact, punctuation and line breaks
changed, about 1% of characters replaced) are found; distinct documents are kept."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curator_array.dedup.candidates import candidate_pairs
from curator_array.dedup.clusters import components_of
from curator_array.dedup.lsh import signature_rows
from curator_array.dedup.minhash import jaccard, shingles
from curator_array.dedup.settings import MinHashSettings
from curator_array.stages.web.languages import for_language, language_rules

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "multilingual-docs.jsonl.gz"
PUNCTUATION = {"。": "．", "、": "，", "，": "、", "「": "『", "」": "』", "（": "(", "）": ")"}


def variants(text: str, rng: random.Random) -> dict[str, str]:
    punctuated = "".join(PUNCTUATION.get(c, c) for c in text)
    lines = punctuated.replace("\n", "").replace("。", "。\n").replace("．", "．\n")
    characters = list(text)
    for position in rng.sample(range(len(characters)), max(1, len(characters) // 100)):
        characters[position] = rng.choice(text)
    return {"exact": text, "punctuation": lines, "one_percent": "".join(characters)}


def planted(language: str):
    rng = random.Random(17)
    # distinct documents: the fixture repeats a few manual sections word for word
    originals = list(dict.fromkeys(d["text"] for d in map(json.loads, gzip.open(FIXTURE, "rt"))
                                   if d["language"] == language))
    keys, texts, copies = [], [], {}
    for index, text in enumerate(originals):
        keys.append(f"a-{index:04d}")
        texts.append(text)
    for index, text in enumerate(originals):
        for kind, copy in variants(text, rng).items():
            key = f"b-{index:04d}-{kind}"
            keys.append(key)
            texts.append(copy)
            copies[key] = f"a-{index:04d}"
    return keys, texts, copies


def removed(keys: list[str], texts: list[str], segmenters) -> set[str]:
    rows = signature_rows(np.arange(len(keys), dtype=np.uint64), pa.array(texts, pa.string()), MinHashSettings(),
                          segmenters)
    clusters = components_of(*candidate_pairs(rows))
    return {keys[i] for i in clusters.nodes[~clusters.kept].tolist()}


@pytest.mark.parametrize("language", ["ja", "zh"])
def test_near_copies_are_found_in_languages_without_spaces(language):
    keys, texts, copies = planted(language)
    kind = for_language(language_rules(), language).segmenter
    assert kind in ("sudachi", "jieba")
    segmenters = [(kind, language)] * len(keys)
    gone = removed(keys, texts, segmenters)
    originals = [k for k in keys if k not in copies]
    found = sum(copy in gone or copies[copy] in gone for copy in copies) / len(copies)
    kept = sum(original not in gone for original in originals) / len(originals)
    # Copies with 1% of their characters replaced sit near the bands' threshold, so what can be
    # found is what LSH promises for each copy's true similarity: 1 - (1 - J^8)^14.
    values, owners = shingles(pa.array(texts, pa.string()), MinHashSettings(), segmenters)
    position = {key: number for number, key in enumerate(keys)}
    similarity = [jaccard(values[owners == position[copy]], values[owners == position[original]])
                  for copy, original in copies.items()]
    promised = float(np.mean([1 - (1 - j ** 8) ** 14 for j in similarity]))
    assert found >= min(0.9, promised - 0.04) and found >= 0.85, \
        f"{language}: {found:.3f} of the planted copies found, {promised:.3f} promised by their similarity"
    assert kept >= 0.99, f"{language}: {kept:.3f} of the distinct documents kept"
    one_percent = [k for k in copies if k.endswith("one_percent")]
    split_at_spaces = removed(keys, texts, None)
    missed = sum(k not in split_at_spaces for k in one_percent) / len(one_percent)
    assert missed > 0.5, "split at spaces alone, most copies with 1% of their characters changed go unseen"

"""datatrove's Gopher, C4 and FineWeb quality filters, rule by rule, on a JSONL corpus: the reference decisions.

Runs in the reference environment (datatrove with spaCy, SudachiPy and jieba, installed apart
from ours), so it imports nothing of curator-array. Each rule runs as a filter of its own with
every other rule off, so a document gets a decision per rule, not only the first rejection.
The limits come from our settings table (passed as JSON), translated to datatrove's
parameter names: the test then compares what the rules compute, not two copies of numbers.

    python reference_filters.py CORPUS.jsonl.gz SETTINGS.json > decisions.json
"""

from __future__ import annotations

import gzip
import json
import sys
import warnings

warnings.filterwarnings("ignore")

from datatrove.data import Document  # noqa: E402
from datatrove.pipeline.filters import (  # noqa: E402
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)

# datatrove picks its word tokenizer by language code; these are the codes it knows them by.
DATATROVE_LANGUAGE = {"en": "en", "de": "deu_Latn", "fr": "fra_Latn", "es": "spa_Latn", "it": "ita_Latn",
                      "pt": "por_Latn", "ru": "rus_Cyrl", "nl": "nld_Latn", "ja": "jpn_Jpan", "zh": "cmn_Hani"}
QUALITY_OFF = dict(min_doc_words=None, max_doc_words=None, min_avg_word_length=None, max_avg_word_length=None,
                   max_symbol_word_ratio=None, max_bullet_lines_ratio=None, max_ellipsis_lines_ratio=None,
                   max_non_alpha_words_ratio=None, min_stop_words=None)
REPETITION_OFF = dict(dup_line_frac=None, dup_para_frac=None, dup_line_char_frac=None, dup_para_char_frac=None,
                      top_n_grams=(), dup_n_grams=())
# Each limit where its rule cannot reject (shares are at most 1).
FINEWEB_OFF = dict(line_punct_thr=0, short_line_thr=2, char_duplicates_ratio=2, new_line_ratio=float("inf"))
FINEWEB_RULES = {"line_punct_ratio": "line_punct_thr", "short_line_ratio": "short_line_thr",
                 "char_dup_ratio": "char_duplicates_ratio", "list_ratio": "new_line_ratio"}
REPETITION_FRACTIONS = {"duplicate_lines": "dup_line_frac", "duplicate_paragraphs": "dup_para_frac",
                        "duplicate_line_chars": "dup_line_char_frac", "duplicate_paragraph_chars": "dup_para_char_frac"}


def rule_filters(ours: dict) -> dict:
    """One datatrove filter per rule of ours, named as our manifests name the rule."""
    language = DATATROVE_LANGUAGE[ours["code"]]
    words = dict(language=language, stop_words=ours["stop_words"])

    def quality(**only):
        return GopherQualityFilter(**{**QUALITY_OFF, **only}, **words)

    def repetition(**only):
        return GopherRepetitionFilter(**{**REPETITION_OFF, **only}, language=language)

    rules = {
        "gopher_quality.word_count": quality(min_doc_words=ours["min_words"], max_doc_words=ours["max_words"]),
        "gopher_quality.mean_word_length": quality(min_avg_word_length=ours["min_avg_word_length"] or None,
                                                   max_avg_word_length=ours["max_avg_word_length"] or None),
        # datatrove holds '#' and ellipses to one limit together; ours are two rules
        "gopher_quality.symbol_ratio": quality(max_symbol_word_ratio=ours["max_hash_ratio"]),
        "gopher_quality.bullet_lines": quality(max_bullet_lines_ratio=ours["max_bullet_lines"]),
        "gopher_quality.ellipsis_lines": quality(max_ellipsis_lines_ratio=ours["max_ellipsis_lines"]),
        # named "max_non_alpha_words_ratio", it is the least share of words with a letter
        "gopher_quality.alphabetic_words": quality(max_non_alpha_words_ratio=ours["min_alphabetic_words"]),
        "gopher_quality.stop_words": quality(min_stop_words=ours["min_stop_words"]),
    }
    for rule, parameter in REPETITION_FRACTIONS.items():
        if ours[parameter]:
            rules[f"gopher_repetition.{rule}"] = repetition(**{parameter: ours[parameter]})
    for n, limit in ours["top_n_grams"]:
        rules[f"gopher_repetition.top_{n}gram"] = repetition(top_n_grams=((n, limit),))
    for n, limit in ours["dup_n_grams"]:
        rules[f"gopher_repetition.duplicate_{n}gram"] = repetition(dup_n_grams=((n, limit),))
    for rule, parameter in FINEWEB_RULES.items():
        rules[f"fineweb_quality.{rule}"] = FineWebQualityFilter(**{**FINEWEB_OFF, parameter: ours[parameter]},
                                                                language=language)
    if ours["c4"]:  # as FineWeb runs it: no terminal-punctuation line rule
        rules["c4_quality"] = C4QualityFilter(filter_no_terminal_punct=False, language=language)
    return rules


def whole_filters(ours: dict) -> list:
    """datatrove's filters as a FineWeb pipeline runs them, every rule at once (for timing)."""
    language = DATATROVE_LANGUAGE[ours["code"]]
    filters = [
        GopherRepetitionFilter(dup_line_frac=ours["dup_line_frac"] or None, dup_para_frac=ours["dup_para_frac"] or None,
                               dup_line_char_frac=ours["dup_line_char_frac"] or None,
                               dup_para_char_frac=ours["dup_para_char_frac"] or None,
                               top_n_grams=tuple(map(tuple, ours["top_n_grams"])),
                               dup_n_grams=tuple(map(tuple, ours["dup_n_grams"])), language=language),
        GopherQualityFilter(min_doc_words=ours["min_words"], max_doc_words=ours["max_words"],
                            min_avg_word_length=ours["min_avg_word_length"] or None,
                            max_avg_word_length=ours["max_avg_word_length"] or None,
                            max_symbol_word_ratio=ours["max_hash_ratio"],
                            max_bullet_lines_ratio=ours["max_bullet_lines"],
                            max_ellipsis_lines_ratio=ours["max_ellipsis_lines"],
                            max_non_alpha_words_ratio=ours["min_alphabetic_words"],
                            min_stop_words=ours["min_stop_words"], stop_words=ours["stop_words"], language=language),
    ]
    if ours["c4"]:
        filters.append(C4QualityFilter(filter_no_terminal_punct=False, language=language))
    filters.append(FineWebQualityFilter(**{parameter: ours[parameter] for parameter in FINEWEB_RULES.values()},
                                        language=language))
    return filters


def decide(filters: dict, document: dict) -> dict:
    row = {"id": document["id"], "language": document["language"]}
    for rule, stage in filters.items():
        doc = Document(text=document["text"], id=document["id"])
        try:
            result = stage.filter(doc)
        except ZeroDivisionError:  # FineWeb's line breaks per word, of a document without words
            result = False
        kept = result is True or (isinstance(result, tuple) and bool(result[0]))
        row[rule] = kept
        if rule == "c4_quality":
            row["c4_text"] = doc.text if kept else None
    return row


def main(corpus: str, settings_path: str) -> None:
    with open(settings_path, encoding="utf-8") as handle:
        settings = json.load(handle)
    filters: dict[str, dict] = {}
    rows = []
    with gzip.open(corpus, "rt", encoding="utf-8") as lines:
        for line in lines:
            document = json.loads(line)
            code = document["language"]
            if code not in filters:
                filters[code] = rule_filters({**settings[code], "code": code})
            rows.append(decide(filters[code], document))
    json.dump(rows, sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:3])

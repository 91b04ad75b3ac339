"""Heuristic quality filters that decide as their references do, vectorised over each batch.

- ``GopherQualityFilter`` and ``GopherRepetitionFilter``: the MassiveText rules (Rae et al.,
  2021) as datatrove implements them for FineWeb, with FineWeb-2's settings for other
  languages (``language_rules.toml``). ``GopherFilter`` runs both rule sets on words
  split once (segmenting Japanese or Chinese costs more than every rule together), and
  counts each drop under the rule set's own name (``gopher_repetition.duplicate_lines``).
- ``C4QualityFilter``: the C4 rules (Raffel et al., 2020) as FineWeb applies them: per line,
  drop lines with a word over 1000 characters, fewer than 3 words, "javascript" or a
  cookie/terms notice, and Wikipedia citation marks; drop the page for "lorem ipsum", a
  curly bracket, or fewer than 5 sentences in what is left. The terminal-punctuation line
  rule of the original C4 is off, as in FineWeb (``terminal_punctuation=True`` turns it on:
  a line must then end in . ? ! " or ' and not in an ellipsis). Only languages whose
  rules say ``c4 = true`` (English) are touched; FineWeb-2 does not apply C4.

Words are split by each document's language's segmenter (``text.segmenters``; for languages
written with spaces, each distinct chunk of the batch once); every count that follows is
vectorised over the whole batch. Each rule's drops are counted in the
manifest as ``<stage>.<rule>``; rules run in the reference's order, so a document is
counted under the first rule that rejects it.

Deliberate differences from the reference, each with its reason:

* a "symbol word" (one without any character that is not punctuation) is one made of
  Unicode punctuation and symbol characters; the reference lists its characters by hand
  (so it counts ``¶`` or ``©`` as a word);
* sentence-final punctuation for the C4 sentence count follows spaCy's sentencizer, which
  includes CJK and other scripts' full stops, as the reference does for English.
"""

from __future__ import annotations

import re
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...text.language import DEFAULT_LANGUAGE
from ...text.ngrams import distinct
from ..columns import row_languages
from ..defaults import TEXT_FIELD
from ..filters import FilterStage
from ..lines import newline_runs, split_lines
from ..requirements import Requirement, module
from .languages import LanguageRules, for_language, language_rules
from .textstats import (
    RepeatedNGrams,
    batch_words,
    duplicate_elements,
    greedy_duplicate_chars,
    has_sentences,
    most_frequent_ngram_chars,
    per_document,
    ratio,
)

SYMBOL_CHARACTERS = r"^[\p{P}\p{S}]+$"
CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
# What a filter whose rules follow each document's language computes with.
LANGUAGE_AWARE_PINNED = ("default_language", "languages", "text_field")
QUALITY_COLUMNS = ("gopher_word_count", "gopher_mean_word_length", "gopher_stop_words")
REPETITION_COLUMNS = ("gopher_duplicate_line_fraction", "gopher_max_ngram_fraction")
C4_COLUMN = "c4_lines_removed"
SEGMENTER_MODULES = {"sudachi": "sudachipy", "jieba": "jieba"}
POLICY_PHRASES = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


def _add(table: pa.Table, name: str, values) -> pa.Table:
    values = np.asarray(values)
    column = pa.array(np.round(values, 4) if values.dtype.kind == "f" else values)
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, column) if index >= 0 else table.append_column(name, column)


def limits(rules: list[LanguageRules], key: str) -> np.ndarray:
    """One value of rule ``key`` per document, given each document's rules."""
    return np.array([getattr(r, key) for r in rules], dtype=np.float64)


def mask(values) -> pa.Array:
    return pa.array(np.asarray(values, dtype=bool))


class LanguageAwareFilter(FilterStage):
    """A filter whose limits and word splitting follow each document's language (its
    ``language`` column, else ``default_language``)."""

    added: ClassVar[tuple[str, ...]] = ()  # the score columns it adds

    def writes(self) -> tuple[str, ...]:
        return self.added

    def needs(self) -> tuple[Requirement, ...]:
        """The segmenters of the languages its rules split words for."""
        kinds = {rules.segmenter for rules in self.languages.values()}
        return tuple(module(SEGMENTER_MODULES[kind]) for kind in sorted(kinds) if kind in SEGMENTER_MODULES)

    def __init__(self, text_field: str = TEXT_FIELD, default_language: str = DEFAULT_LANGUAGE,
                 rules: dict[str, LanguageRules] | None = None):
        self.default_language = default_language
        self.languages = rules or language_rules()
        super().__init__(text_field)

    def rules_for(self, language: str) -> LanguageRules:
        return for_language(self.languages, language)

    def _words(self, table: pa.Table, text: pa.ChunkedArray) -> _Words:
        return _Words(table, text, self.default_language, self.languages)


class _Words:
    """One batch's documents as the Gopher rules read them: each one's language rules,
    its words (split by its language's segmenter, once) and the batch's vocabulary."""

    def __init__(self, table: pa.Table, text: pa.ChunkedArray, default_language: str,
                 languages: dict[str, LanguageRules]):
        self.rows = table.num_rows
        self.text = pc.fill_null(text, "")
        self.codes = row_languages(table, default_language)
        self.rules = [for_language(languages, code) for code in self.codes]
        self.spaced = np.array([r.segmenter != "none" for r in self.rules])
        self.words, self.parents = batch_words(self.text, self.codes, [r.segmenter for r in self.rules])
        self.vocabulary = _Vocabulary(self.words)

    def limits(self, key: str) -> np.ndarray:
        return limits(self.rules, key)

    def ngram_limits(self, key: str, n: int) -> np.ndarray:
        limits = [r.limit(key, n) for r in self.rules]
        return np.array([np.nan if limit is None else limit for limit in limits], dtype=np.float64)


def quality_rules(words: _Words, table: pa.Table) -> tuple[pa.Table, dict[str, pa.Array]]:
    """The Gopher quality rules; the table gains the word count, mean word length and stop words."""
    rows, text, parents, vocabulary = words.rows, words.text, words.parents, words.vocabulary
    n_words = per_document(parents, None, rows)
    symbol = vocabulary.per_word(pc.match_substring_regex(vocabulary.words, SYMBOL_CHARACTERS))
    lengths = vocabulary.per_word(pc.utf8_length(vocabulary.words)).astype(np.float64)
    non_symbol = per_document(parents, ~symbol, rows)
    mean_length = ratio(per_document(parents, lengths * ~symbol, rows), non_symbol, empty=np.nan)
    hashes = pc.count_substring(text, "#").to_numpy(zero_copy_only=False)
    ellipses = (pc.count_substring(text, "...").to_numpy(zero_copy_only=False)
                + pc.count_substring(text, "…").to_numpy(zero_copy_only=False))
    lines = split_lines(text)
    line_count, bullets, ellipsis_lines = _line_shares(lines, rows)
    alphabetic = per_document(parents, vocabulary.per_word(pc.match_substring_regex(vocabulary.words, r"\p{L}")),
                              rows)
    stop_words = _distinct_stop_words(words)
    limit = words.limits
    with np.errstate(invalid="ignore", divide="ignore"):
        rules = {
            "word_count": (non_symbol >= limit("min_words")) & (non_symbol <= limit("max_words")),
            "mean_word_length": ~((mean_length < limit("min_avg_word_length"))
                                  | (mean_length > limit("max_avg_word_length"))),
            "hash_ratio": ~(hashes / n_words > limit("max_hash_ratio")),
            "ellipsis_ratio": ~(ellipses / n_words > limit("max_ellipsis_ratio")),
            "bullet_lines": ~(ratio(bullets, line_count) > limit("max_bullet_lines")),
            "ellipsis_lines": ~(ratio(ellipsis_lines, line_count) > limit("max_ellipsis_lines")),
            "alphabetic_words": ~(alphabetic / n_words < limit("min_alphabetic_words")),
            "stop_words": ~(stop_words < limit("min_stop_words")),
        }
    for name, values in zip(QUALITY_COLUMNS, (non_symbol.astype(np.int64), np.nan_to_num(mean_length),
                                             stop_words.astype(np.int64))):
        table = _add(table, name, values)
    return table, {rule: mask(~words.spaced | values) for rule, values in rules.items()}


def repetition_rules(words: _Words, table: pa.Table) -> tuple[pa.Table, dict[str, pa.Array]]:
    """The Gopher repetition rules; the table gains the duplicate-line share and the worst n-gram share."""
    rows, text, parents = words.rows, words.text, words.parents
    chars = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.float64)
    paragraphs = pc.split_pattern_regex(pc.utf8_trim_whitespace(text), r"\n{2,}")
    lines = newline_runs(text)
    paragraph_dups, paragraph_count, paragraph_dup_chars = duplicate_elements(paragraphs, rows)
    line_dups, line_count, line_dup_chars = duplicate_elements(lines, rows)
    limit = words.limits
    rules = {
        "duplicate_paragraphs": _within(ratio(paragraph_dups, paragraph_count), limit("dup_para_frac")),
        "duplicate_paragraph_chars": _within(ratio(paragraph_dup_chars, chars), limit("dup_para_char_frac")),
        "duplicate_lines": _within(ratio(line_dups, line_count), limit("dup_line_frac")),
        "duplicate_line_chars": _within(ratio(line_dup_chars, chars), limit("dup_line_char_frac")),
    }
    vocabulary = words.vocabulary
    lengths = vocabulary.per_word(pc.utf8_length(vocabulary.words)).astype(np.float64)
    repeats = RepeatedNGrams(vocabulary.indices, lengths, parents)
    measures = {"top_n_grams": most_frequent_ngram_chars, "dup_n_grams": greedy_duplicate_chars}
    sizes = sorted({(n, key) for rules in set(words.rules) for key in measures for n, _ in getattr(rules, key)})
    # By n, as each count starts from the shorter n-grams' repeats.
    fractions = {(key, n): ratio(measures[key](repeats, rows, n), chars) for n, key in sizes}
    worst = np.zeros(rows)
    for key in measures:  # the reference's order: top n-grams, then duplicate n-grams, each by n
        for n in sorted(n for kind, n in fractions if kind == key):
            limits = words.ngram_limits(key, n)
            name = f"top_{n}gram" if key == "top_n_grams" else f"duplicate_{n}gram"
            rules[name] = (np.isnan(limits) | ~(fractions[key, n] > limits)) | ~words.spaced
            worst = np.maximum(worst, fractions[key, n])
    empty = chars == 0
    for name, values in zip(REPETITION_COLUMNS, (ratio(line_dups, line_count), worst)):
        table = _add(table, name, values)
    rules = {"empty": ~empty, **{name: values | empty for name, values in rules.items()}}
    return table, {rule: mask(values) for rule, values in rules.items()}


class GopherQualityFilter(LanguageAwareFilter):
    name = "gopher_quality"
    pinned = LANGUAGE_AWARE_PINNED
    added = QUALITY_COLUMNS

    def score(self, table, text):
        return quality_rules(self._words(table, text), table)


class GopherRepetitionFilter(LanguageAwareFilter):
    name = "gopher_repetition"
    pinned = LANGUAGE_AWARE_PINNED
    added = REPETITION_COLUMNS

    def score(self, table, text):
        return repetition_rules(self._words(table, text), table)


class GopherFilter(LanguageAwareFilter):
    """Gopher repetition, then Gopher quality, on words split once; each drop is counted
    under its rule set's name, as if the two filters ran one after the other."""

    name = "gopher"
    pinned = LANGUAGE_AWARE_PINNED
    added = REPETITION_COLUMNS + QUALITY_COLUMNS

    def score(self, table, text):
        words = self._words(table, text)
        table, repetition = repetition_rules(words, table)
        table, quality = quality_rules(words, table)
        return table, {**{f"{GopherRepetitionFilter.name}.{rule}": kept for rule, kept in repetition.items()},
                       **{f"{GopherQualityFilter.name}.{rule}": kept for rule, kept in quality.items()}}


class _Vocabulary:
    """The distinct words of a batch: a per-word test runs once per distinct word."""

    def __init__(self, words: pa.Array):
        encoded = pc.dictionary_encode(words)
        self.words = encoded.dictionary
        self.indices = encoded.indices.to_numpy(zero_copy_only=False)

    def per_word(self, values: pa.Array) -> np.ndarray:
        return values.to_numpy(zero_copy_only=False)[self.indices]


def _line_shares(lines: pa.ListArray, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lines per document, and those starting with a bullet or ending in an ellipsis (as the
    reference reads lines: every line break splits, empty lines count)."""
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    flat, parents = pc.list_flatten(lines), pc.list_parent_indices(lines).to_numpy(zero_copy_only=False)
    starts, ends = pc.utf8_ltrim_whitespace(flat), pc.utf8_rtrim_whitespace(flat)
    bullets = pc.or_(pc.starts_with(starts, "•"), pc.starts_with(starts, "-")).to_numpy(zero_copy_only=False)
    ellipses = pc.or_(pc.ends_with(ends, "..."), pc.ends_with(ends, "…")).to_numpy(zero_copy_only=False)
    return per_document(parents, None, rows), per_document(parents, bullets, rows), per_document(parents, ellipses, rows)


def _distinct_stop_words(words: _Words) -> np.ndarray:
    """How many different stop words of its language each document contains (as written)."""
    rows, parents, vocabulary = words.rows, words.parents, words.vocabulary
    hit = np.zeros(len(parents), dtype=bool)
    codes = np.array(words.codes)
    for code, rules in dict(zip(words.codes, words.rules)).items():
        if rules.stop_words and len(parents):
            stop = pc.is_in(vocabulary.words, value_set=pa.array(sorted(rules.stop_words)))
            hit |= vocabulary.per_word(stop) & (codes == code)[parents]
    if not hit.any():
        return np.zeros(rows)
    pairs = distinct(parents[hit].astype(np.int64) * len(vocabulary.words) + vocabulary.indices[hit])
    return per_document(pairs // len(vocabulary.words), None, rows)


def _within(values: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """Pass unless over the limit; a limit of 0 turns the rule off."""
    return (limits == 0) | ~(values > limits)


class C4QualityFilter(LanguageAwareFilter):
    """Cleans lines, then filters pages; the text column holds the cleaned text afterwards.

    Documents whose language rules say ``c4 = false`` pass untouched.
    """

    name = "c4_quality"
    pinned = (*LANGUAGE_AWARE_PINNED, "max_word_length", "min_sentences", "min_words_per_line",
              "terminal_punctuation")

    def __init__(self, text_field: str = TEXT_FIELD, default_language: str = DEFAULT_LANGUAGE,
                 rules: dict[str, LanguageRules] | None = None, terminal_punctuation: bool = False,
                 min_words_per_line: int = 3, min_sentences: int = 5, max_word_length: int = 1000):
        self.terminal_punctuation = terminal_punctuation
        self.min_words_per_line, self.min_sentences = min_words_per_line, min_sentences
        self.max_word_length = max_word_length
        super().__init__(text_field, default_language, rules)

    def writes(self) -> tuple[str, ...]:
        return self.text_field, C4_COLUMN

    def score(self, table, text):
        rows = table.num_rows
        texts = pc.fill_null(text, "").to_pylist()
        codes = row_languages(table, self.default_language)
        applies = np.array([self.rules_for(code).c4 for code in codes], dtype=bool)
        cleaned, enough, lorem, curly = [], np.zeros(rows, bool), np.zeros(rows, bool), np.zeros(rows, bool)
        removed = np.zeros(rows, dtype=np.int64)
        for index, value in enumerate(texts):
            if not applies[index]:
                cleaned.append(value)
                continue
            kept, dropped, verdict = self._clean(value)
            cleaned.append("\n".join(kept).strip())
            removed[index] = dropped
            lorem[index], curly[index] = verdict == "lorem_ipsum", verdict == "curly_bracket"
            enough[index] = has_sentences(kept, codes[index], self.min_sentences)
        table = table.set_column(table.schema.get_field_index(self.text_field), self.text_field,
                                 pa.array(cleaned, table.schema.field(self.text_field).type))
        table = _add(table, C4_COLUMN, removed)
        rules = {
            "lorem_ipsum": ~applies | ~lorem,
            "curly_bracket": ~applies | ~curly,
            "too_few_sentences": ~applies | lorem | curly | enough,
        }
        return table, {rule: mask(values) for rule, values in rules.items()}

    def _clean(self, text: str) -> tuple[list[str], int, str | None]:
        """The lines kept, how many were dropped, and a whole-page verdict, line by line as C4 reads."""
        kept, dropped = [], 0
        for line in text.splitlines():
            line = line.strip()
            if not line:  # blank lines go, uncounted
                continue
            words = line.split()
            if len(line) > self.max_word_length and max(map(len, words)) > self.max_word_length:
                dropped += 1
                continue
            line = _CITATION.sub("", line)
            if self.terminal_punctuation and (not line.endswith((".", "?", "!", '"', "'")) or line.endswith("...")):
                dropped += 1
                continue
            if len(words) < self.min_words_per_line:
                dropped += 1
                continue
            lowered = line.lower()
            if "lorem ipsum" in lowered:
                return kept, dropped, "lorem_ipsum"
            if "javascript" in lowered:
                dropped += 1
                continue
            if "{" in line:
                return kept, dropped, "curly_bracket"
            if _POLICY.search(lowered):
                dropped += 1
                continue
            kept.append(line)
        return kept, dropped, None


_CITATION = re.compile(CITATION)
_POLICY = re.compile("|".join(map(re.escape, POLICY_PHRASES)))

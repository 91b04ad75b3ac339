"""Heuristic quality filters from the literature, vectorised over each batch.

- ``GopherQualityFilter`` and ``GopherRepetitionFilter``: the MassiveText rules (Rae et
  al., 2021): word counts, word length, symbols, bullets, ellipses, alphabetic words,
  stop words; duplicate lines and paragraphs; frequent and repeated n-grams.
- ``C4QualityFilter``: the C4 rules (Raffel et al., 2020): keep only lines that end in
  terminal punctuation and have at least 3 words, without "javascript" or a cookie/terms
  notice; then drop pages with fewer than 5 sentences, "lorem ipsum" or a curly bracket.

Word-based rules follow each document's detected language (the ``language`` column, or
``default_language`` without one): see ``languages``. Every rule's drops are counted in
the manifest as ``<stage>.<rule>``; the measured values are added as columns.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..filters import FilterStage
from . import languages
from .textstats import (
    duplicate_fractions,
    duplicate_ngram_fraction,
    flatten,
    item_ids,
    nonempty_pieces,
    per_document,
    ratio,
    regroup,
    top_ngram_fraction,
)

BULLET_START = r"^[•●‣◦▪▸►*\-–]"
ELLIPSIS_END = r"(\.\.\.|…)$"
TERMINAL_END = r"[.!?\"'”’。！？」』]$"
POLICY_PHRASES = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
SENTENCE_END = r"[.!?。！？]+"


def _languages(table: pa.Table, default: str) -> pa.ChunkedArray:
    if "language" in table.column_names:
        return pc.fill_null(table.column("language").cast(pa.string()), default)
    return pa.chunked_array([pa.array([default] * table.num_rows, pa.string())])


def _add(table: pa.Table, name: str, values) -> pa.Table:
    column = pa.array(np.round(values, 4) if np.asarray(values).dtype.kind == "f" else values)
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, column) if index >= 0 else table.append_column(name, column)


def _mask(values) -> pa.Array:
    return pa.array(np.asarray(values, dtype=bool))


class _LanguageAwareFilter(FilterStage):
    def __init__(self, text_field: str = "text", default_language: str = "en"):
        self.default_language = default_language
        super().__init__(text_field)

    def _words(self, table: pa.Table, text: pa.ChunkedArray):
        language = _languages(table, self.default_language)
        words = languages.word_lists(pc.fill_null(text, ""), language)
        flat, parents = flatten(words)
        flat = flat.cast(pa.string())
        skip = languages.untokenized(language).to_numpy(zero_copy_only=False)
        return language, flat, parents, skip


class GopherQualityFilter(_LanguageAwareFilter):
    name = "gopher_quality"

    def __init__(self, min_words: int = 50, max_words: int = 100_000, min_mean_word_length: float = 3,
                 max_mean_word_length: float = 10, max_symbol_ratio: float = 0.1, max_bullet_lines: float = 0.9,
                 max_ellipsis_lines: float = 0.3, min_alphabetic_words: float = 0.8, min_stop_words: int = 2,
                 text_field: str = "text", default_language: str = "en"):
        self.min_words, self.max_words = min_words, max_words
        self.min_mean_word_length, self.max_mean_word_length = min_mean_word_length, max_mean_word_length
        self.max_symbol_ratio, self.max_bullet_lines = max_symbol_ratio, max_bullet_lines
        self.max_ellipsis_lines, self.min_alphabetic_words = max_ellipsis_lines, min_alphabetic_words
        self.min_stop_words = min_stop_words
        super().__init__(text_field, default_language)

    def score(self, table, text):
        rows = table.num_rows
        text = pc.fill_null(text, "")
        language, words, parents, skip = self._words(table, text)
        word_lengths = pc.utf8_length(words).to_numpy(zero_copy_only=False)
        count = per_document(parents, None, rows)
        mean_length = ratio(per_document(parents, word_lengths, rows), count)
        symbols = sum(pc.count_substring(text, s).to_numpy(zero_copy_only=False) for s in ("#", "...", "…"))
        symbol_ratio = ratio(symbols.astype(np.float64), count)
        lines, line_parents = flatten(nonempty_pieces(text, r"\n"))
        line_count = per_document(line_parents, None, rows)
        bullets = ratio(per_document(line_parents, pc.match_substring_regex(lines, BULLET_START), rows), line_count)
        ellipses = ratio(per_document(line_parents, pc.match_substring_regex(lines, ELLIPSIS_END), rows), line_count)
        alphabetic = ratio(per_document(parents, pc.match_substring_regex(words, r"\p{L}"), rows), count)
        word_language = pc.take(language, pa.array(parents))
        keys = pc.binary_join_element_wise(word_language, pc.utf8_lower(words), "\x1f")
        stop_words = per_document(parents, pc.is_in(keys, value_set=languages.stop_word_keys()), rows)
        has_list = languages.has_stop_words(language).to_numpy(zero_copy_only=False)
        spaced = ~pc.is_in(language, value_set=pa.array(sorted(languages.CHARACTER_TOKENIZED))).to_numpy(
            zero_copy_only=False)
        table = _add(table, "gopher_word_count", count.astype(np.int64))
        table = _add(table, "gopher_mean_word_length", mean_length)
        table = _add(table, "gopher_stop_words", stop_words.astype(np.int64))
        rules = {
            "word_count": skip | ((count >= self.min_words) & (count <= self.max_words)),
            "mean_word_length": skip | ~spaced
            | ((mean_length >= self.min_mean_word_length) & (mean_length <= self.max_mean_word_length)),
            "symbol_ratio": symbol_ratio <= self.max_symbol_ratio,
            "bullet_lines": bullets <= self.max_bullet_lines,
            "ellipsis_lines": ellipses <= self.max_ellipsis_lines,
            "alphabetic_words": skip | (alphabetic >= self.min_alphabetic_words),
            "stop_words": skip | ~has_list | (stop_words >= self.min_stop_words),
        }
        return table, {rule: _mask(values) for rule, values in rules.items()}


TOP_NGRAMS = {2: 0.20, 3: 0.18, 4: 0.16}
DUPLICATE_NGRAMS = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}


class GopherRepetitionFilter(_LanguageAwareFilter):
    name = "gopher_repetition"

    def __init__(self, max_duplicate_lines: float = 0.3, max_duplicate_paragraphs: float = 0.3,
                 max_duplicate_line_chars: float = 0.2, max_duplicate_paragraph_chars: float = 0.2,
                 top_ngrams: dict[str, float] | None = None, duplicate_ngrams: dict[str, float] | None = None,
                 text_field: str = "text", default_language: str = "en"):
        self.max_duplicate_lines, self.max_duplicate_paragraphs = max_duplicate_lines, max_duplicate_paragraphs
        self.max_duplicate_line_chars = max_duplicate_line_chars
        self.max_duplicate_paragraph_chars = max_duplicate_paragraph_chars
        self.top_ngrams = {str(k): v for k, v in (top_ngrams or TOP_NGRAMS).items()}
        self.duplicate_ngrams = {str(k): v for k, v in (duplicate_ngrams or DUPLICATE_NGRAMS).items()}
        super().__init__(text_field, default_language)

    def score(self, table, text):
        rows = table.num_rows
        text = pc.fill_null(text, "")
        lines, line_parents = flatten(nonempty_pieces(text, r"\n"))
        paragraphs, paragraph_parents = flatten(nonempty_pieces(text, r"\n\s*\n"))
        duplicate_lines, duplicate_line_chars = duplicate_fractions(lines, line_parents, rows)
        duplicate_paragraphs, duplicate_paragraph_chars = duplicate_fractions(paragraphs, paragraph_parents, rows)
        _, words, parents, skip = self._words(table, text)
        lengths = pc.utf8_length(words).to_numpy(zero_copy_only=False).astype(np.float64)
        word_chars = per_document(parents, lengths, rows)
        ids = item_ids(words)
        rules = {
            "duplicate_lines": duplicate_lines <= self.max_duplicate_lines,
            "duplicate_paragraphs": duplicate_paragraphs <= self.max_duplicate_paragraphs,
            "duplicate_line_chars": duplicate_line_chars <= self.max_duplicate_line_chars,
            "duplicate_paragraph_chars": duplicate_paragraph_chars <= self.max_duplicate_paragraph_chars,
        }
        worst = np.zeros(rows)
        for n, limit in self.top_ngrams.items():
            fraction = top_ngram_fraction(ids, lengths, parents, rows, int(n), word_chars)
            rules[f"top_{n}gram"] = skip | (fraction <= limit)
            worst = np.maximum(worst, fraction)
        for n, limit in self.duplicate_ngrams.items():
            fraction = duplicate_ngram_fraction(ids, lengths, parents, rows, int(n), word_chars)
            rules[f"duplicate_{n}gram"] = skip | (fraction <= limit)
            worst = np.maximum(worst, fraction)
        table = _add(table, "gopher_duplicate_line_fraction", duplicate_lines)
        table = _add(table, "gopher_max_ngram_fraction", worst)
        return table, {rule: _mask(values) for rule, values in rules.items()}


class C4QualityFilter(_LanguageAwareFilter):
    """Cleans lines, then filters pages; the text column holds the cleaned text afterwards."""

    name = "c4_quality"

    def __init__(self, min_words_per_line: int = 3, min_sentences: int = 5, text_field: str = "text",
                 default_language: str = "en"):
        self.min_words_per_line, self.min_sentences = min_words_per_line, min_sentences
        super().__init__(text_field, default_language)

    def score(self, table, text):
        rows = table.num_rows
        text = pc.fill_null(text, "")
        lines_per_doc = nonempty_pieces(text, r"\n")
        lines, parents = flatten(lines_per_doc)
        language = _languages(table, self.default_language)
        line_language = pc.take(language, pa.array(parents))
        line_words = pc.list_value_length(languages.word_lists(lines, line_language)).to_numpy(zero_copy_only=False)
        lowered = pc.utf8_lower(lines)
        notice = np.zeros(len(lines), dtype=bool)
        for phrase in (*POLICY_PHRASES, "javascript"):
            notice |= pc.match_substring(lowered, phrase).to_numpy(zero_copy_only=False)
        keep = (
            pc.match_substring_regex(lines, TERMINAL_END).to_numpy(zero_copy_only=False)
            & (line_words >= self.min_words_per_line)
            & ~notice
        )
        kept_lines = lines.filter(pa.array(keep)).cast(pa.large_string())
        cleaned = pc.binary_join(regroup(kept_lines, parents[keep], rows), pa.scalar("\n", pa.large_string()))
        removed = per_document(parents, ~keep, rows).astype(np.int64)
        sentences = pc.count_substring_regex(cleaned, SENTENCE_END).to_numpy(zero_copy_only=False)
        lowered_text = pc.utf8_lower(cleaned)
        table = table.set_column(table.schema.get_field_index(self.text_field), self.text_field, cleaned)
        table = _add(table, "c4_lines_removed", removed)
        rules = {
            "no_lines_left": pc.greater(pc.utf8_length(cleaned), 0).to_numpy(zero_copy_only=False),
            "too_few_sentences": sentences >= self.min_sentences,
            "lorem_ipsum": ~pc.match_substring(lowered_text, "lorem ipsum").to_numpy(zero_copy_only=False),
            "curly_bracket": ~pc.match_substring(cleaned, "{").to_numpy(zero_copy_only=False),
        }
        return table, {rule: _mask(values) for rule, values in rules.items()}

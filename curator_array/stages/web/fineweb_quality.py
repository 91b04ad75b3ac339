"""FineWeb's own quality filter: the line-level rules FineWeb added after Gopher and C4.

Four rules over a document's non-blank lines (lines as ``text.split("\\n")`` gives them), in
the reference's order, each with its limit from the document's language rules:

- ``line_punct_ratio``: the share of lines ending in sentence-final punctuation is below
  ``line_punct_thr`` (0.12 for English);
- ``short_line_ratio``: the share of lines of at most 30 characters is above
  ``short_line_thr`` (0.67; FineWeb-2 turns it off, a limit of 1);
- ``char_dup_ratio``: the characters of lines that repeat an earlier line, over all
  characters but line breaks, are above ``char_duplicates_ratio`` (0.01; FineWeb-2: 0.1);
- ``list_ratio``: line breaks per word are above ``new_line_ratio`` (0.3), words split by
  the language's segmenter, as the Gopher rules split them.

A document without a non-blank line is dropped as ``empty``. Everything is vectorised over
the batch except the word split, which runs only for the documents the first three rules
keep (segmenting Japanese or Chinese costs more than all the rules together).

One deliberate difference from the reference: "sentence-final punctuation" is a character
with Unicode's Sentence_Terminal property (plus the three Khmer signs the reference adds);
the reference lists its characters by hand from an older Unicode version, so about a dozen
rare characters of recent scripts differ.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex

from ..columns import row_languages
from .quality import LANGUAGE_AWARE_PINNED, LanguageAwareFilter, limits, mask
from .textstats import batch_words, duplicate_elements, per_document, ratio

SHORT_LINE_CHARACTERS = 30
_SENTENCE_FINAL = regex.compile(r"[\p{Sentence_Terminal}\u17d6\u17d9\u17da]")


def ends_sentences(last_characters: pa.Array) -> np.ndarray:
    """Per line (given its last character): whether it ends in sentence-final punctuation.

    RE2 (pyarrow's regex engine) has no Sentence_Terminal class, so each distinct last
    character of the batch is looked up once with ``regex``.
    """
    encoded = pc.dictionary_encode(last_characters)
    verdicts = np.array([bool(_SENTENCE_FINAL.fullmatch(c)) for c in encoded.dictionary.to_pylist()], dtype=bool)
    return verdicts[encoded.indices.to_numpy(zero_copy_only=False)] if len(verdicts) else np.zeros(0, dtype=bool)


class FineWebQualityFilter(LanguageAwareFilter):
    name = "fineweb_quality"
    pinned = LANGUAGE_AWARE_PINNED

    def score(self, table, text):
        rows = table.num_rows
        text = pc.fill_null(text, "")
        lines = pc.split_pattern(text, "\n")
        lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
        flat, parents = pc.list_flatten(lines), pc.list_parent_indices(lines).to_numpy(zero_copy_only=False)
        filled = pc.invert(pc.equal(pc.utf8_trim_whitespace(flat), "")).to_numpy(zero_copy_only=False)
        flat, parents = flat.filter(pa.array(filled)), parents[filled]
        counts = per_document(parents, None, rows)
        punctuated = ends_sentences(pc.utf8_slice_codeunits(flat, -1))
        short = pc.less_equal(pc.utf8_length(flat), SHORT_LINE_CHARACTERS).to_numpy(zero_copy_only=False)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        _, _, duplicate_chars = duplicate_elements(pa.ListArray.from_arrays(pa.array(offsets), flat), rows)
        newlines = pc.count_substring(text, "\n").to_numpy(zero_copy_only=False).astype(np.float64)
        chars = pc.utf8_length(text).to_numpy(zero_copy_only=False) - newlines

        codes = row_languages(table, self.default_language)
        row_rules = [self.rules_for(code) for code in codes]
        limit = partial(limits, row_rules)
        empty = counts == 0
        rules = {
            "empty": ~empty,
            "line_punct_ratio": ~(ratio(per_document(parents, punctuated, rows), counts)
                                  < limit("line_punct_thr")),
            "short_line_ratio": ~(ratio(per_document(parents, short, rows), counts) > limit("short_line_thr")),
            "char_dup_ratio": ~(ratio(duplicate_chars, chars) > limit("char_duplicates_ratio")),
        }
        alive = np.logical_and.reduce(list(rules.values()))
        rules["list_ratio"] = ~alive | self._few_line_breaks(text, codes, newlines, alive, row_rules, limit)
        return table, {rule: mask(values) for rule, values in rules.items()}

    def _few_line_breaks(self, text, codes, newlines, alive, row_rules, limit) -> np.ndarray:
        """Line breaks per word within the limit (for the documents still in; a language
        without a segmenter has no words to count and passes)."""
        passes = np.ones(len(alive), dtype=bool)
        chosen = np.flatnonzero(alive)
        if len(chosen) == 0:
            return passes
        _, parents = batch_words(text.take(pa.array(chosen)), [codes[i] for i in chosen],
                                 [row_rules[i].segmenter for i in chosen])
        counts = np.bincount(parents, minlength=len(chosen)).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            over = (counts > 0) & (newlines[chosen] / counts > limit("new_line_ratio")[chosen])
        passes[chosen] = ~over
        return passes

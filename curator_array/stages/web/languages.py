"""What the quality rules need to know per language: how to split words, and stop words.

Languages written without spaces between words (Japanese, Chinese) are split into one
token per character of their scripts, so word-count rules measure them too; other such
languages (Thai, Lao, Khmer, Burmese) have no tokenizer here and the word rules are not
applied to them. Stop-word lists are short lists of the most frequent function words
(Gopher uses eight for English); a language without a list skips the stop-word rule.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

CHARACTER_TOKENIZED = frozenset({"ja", "zh"})
UNTOKENIZED = frozenset({"th", "lo", "km", "my"})
CJK_CHARACTER = r"([\p{Han}\p{Hiragana}\p{Katakana}])"

STOP_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the be to of and that have with".split()),
    "de": frozenset("der die das und ist zu den von mit nicht ein eine auf sich".split()),
    "fr": frozenset("le la les de et à un une est que des du en pas".split()),
    "es": frozenset("el la los de que y en un una es por con para del".split()),
    "it": frozenset("il la di che e è un una per con non del della".split()),
    "pt": frozenset("o a os as de que e é um uma para com não do da".split()),
    "nl": frozenset("de het een en van is dat op te in niet zijn".split()),
    "ja": frozenset("の に は を た が で て と も し な".split()),
    "zh": frozenset("的 是 了 在 和 有 我 不 这 人 也 就".split()),
}


def word_lists(text: pa.ChunkedArray, language: pa.ChunkedArray) -> pa.ListArray:
    """The words of each document, split the way its language needs."""
    by_character = pc.is_in(language, value_set=pa.array(sorted(CHARACTER_TOKENIZED)))
    spaced = pc.replace_substring_regex(text, CJK_CHARACTER, r" \1 ")
    tokens = pc.if_else(by_character, spaced, text)
    return pa.chunked_array(pc.utf8_split_whitespace(tokens)).combine_chunks()


def untokenized(language: pa.ChunkedArray):
    """Rows whose language has no tokenizer here: word-based rules pass them."""
    return pc.is_in(language, value_set=pa.array(sorted(UNTOKENIZED)))


def stop_word_keys() -> pa.Array:
    """``language\\x1fword`` for every stop word, to look words up per row's language."""
    return pa.array(sorted(f"{lang}\x1f{word}" for lang, words in STOP_WORDS.items() for word in words))


def has_stop_words(language: pa.ChunkedArray):
    return pc.is_in(language, value_set=pa.array(sorted(STOP_WORDS)))

"""Text primitives shared by the quality filters and deduplication.

Here: word segmenters per script (``segmenters``: the rule-based splitter of spaced
languages, SudachiPy for Japanese, jieba for Chinese) and stable 64-bit keys of word
n-grams over a whole batch (``ngrams``). Both work on plain strings and numpy arrays, so
a filter and a dedup phase that split or hash the same text get the same words and keys.

May import: core. Never Ray.
"""

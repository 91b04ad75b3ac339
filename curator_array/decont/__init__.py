"""Benchmark decontamination: the user's eval sets as one n-gram index, and documents
checked against it.

Here: the eval files read and checked (``evalsets``), the index built, saved and loaded
(``index``), the matching of a batch of documents and GPT-3's cut (``matching``), and the
settings a run pins (``settings``). Words are dedup's (``dedup.words``: simplified text,
split by each document's language), so decontamination and dedup see the same words.
The stage that runs it is ``stages.decontaminate``; its options are
``run.phases.decontamination``'s.

May import: core, text, dedup (its words). Never Ray.
"""

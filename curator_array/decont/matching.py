"""Documents checked against the index: which n-grams of a batch hit which eval records,
what that decides per document, and GPT-3's cut.

A batch's words are found once (``dedup.words``, by each document's language), and each
n-gram length of the index is looked up over all of them at once; only documents with a
hit are looked at one by one. A decision depends on the document and the index alone, so
a run's output is the same however it was sharded.

GPT-3's rule (``cut``): each hit is removed with ``CUT_MARGIN`` characters on either side;
what is left falls into pieces, of which those shorter than ``MIN_PIECE`` characters are
dropped; a document cut in more than ``MAX_SPLITS`` places is dropped whole, and so is one
with no piece left. The pieces kept are joined by a blank line, so the document keeps its
row, its id and its other fields.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..core.records.contamination import (
    EXAMPLES_PER_TASK,
    NGRAMS_KEPT,
    Contamination,
    Example,
    TaskHits,
)
from ..dedup.words import NONE, SPACED, simplify, word_hashes, words
from ..text.ngrams import keys_at
from ..text.segmenters import SEGMENTERS
from .index import NGramIndex

CUT_MARGIN = 200
MIN_PIECE = 200
MAX_SPLITS = 10
PIECE_JOINER = "\n\n"
NUMBER_SEPARATORS = frozenset(".,٫")


@dataclass(frozen=True)
class BatchHits:
    """Every hit of one batch: the document, its first word (in the batch's flat words), the
    n-gram's length, the eval record and the key."""

    documents: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    records: np.ndarray
    keys: np.ndarray
    words: pa.Array

    def __len__(self) -> int:
        return len(self.documents)

    def spell(self, hit: int) -> str:
        start = int(self.starts[hit])
        return " ".join(self.words.slice(start, int(self.lengths[hit])).to_pylist())

    def first_per_document(self, tasks: np.ndarray) -> dict[int, int]:
        """Each hit document's first hit: of the first eval task it hits (``tasks``: each hit's
        task number, in the eval files' order), the earliest word; the longer n-gram on a tie.
        A document is removed once, under that task, whatever else it hits."""
        order = np.lexsort((-self.lengths, self.starts, tasks, self.documents))
        documents = self.documents[order]
        firsts = np.ones(len(order), bool)
        firsts[1:] = documents[1:] != documents[:-1]
        return dict(zip(documents[firsts].tolist(), order[firsts].tolist()))


def find_hits(texts: pa.Array, segmenters: Sequence[tuple[str, str]] | None, index: NGramIndex) -> BatchHits:
    flat, parents = words(texts, segmenters)
    hashes = word_hashes(flat)
    found = []
    for length in index.lengths:
        starts = np.arange(max(len(hashes) - length + 1, 0))
        if not len(starts):
            continue
        starts = starts[parents[starts] == parents[starts + length - 1]]
        keys = keys_at(hashes, starts, length)
        records = index.lookup(keys)
        hit = records >= 0
        found.append((parents[starts[hit]], starts[hit], np.full(int(hit.sum()), length), records[hit], keys[hit]))
    if not found:
        empty = np.zeros(0, np.int64)
        return BatchHits(empty, empty, empty, empty, empty.astype(np.uint64), flat)
    return BatchHits(*(np.concatenate(column) for column in zip(*found)), flat)


def tally(hits: BatchHits, index: NGramIndex, document_ids: Sequence[str], firsts: dict[int, int],
          characters: dict[int, int]) -> Contamination:
    """What ``hits`` found, by eval task: ``firsts`` gives each hit document's first hit (its
    task is the one that removed or cut it), ``characters`` what each lost."""
    if not len(hits):
        return Contamination()
    tasks = index.task_of(hits.records)
    pairs = np.unique(np.stack([hits.documents, tasks]), axis=1)
    by_task: dict[str, TaskHits] = {}
    for number, name in enumerate(index.tasks):
        documents = int((pairs[1] == number).sum())
        matched = int((tasks == number).sum())
        if documents or matched:
            by_task[name] = TaskHits(documents, matched)
    for document, hit in firsts.items():
        name = index.tasks[tasks[hit]]
        by_task[name] = by_task[name] + TaskHits(characters_cut=characters.get(document, 0))
    examples: dict[str, tuple[Example, ...]] = {}
    first_of_pair = {}
    for hit in np.lexsort((hits.starts, tasks, hits.documents)).tolist():
        first_of_pair.setdefault((int(hits.documents[hit]), int(tasks[hit])), hit)
    for number, name in enumerate(index.tasks):
        mine = sorted(((document_ids[d], hit) for (d, t), hit in first_of_pair.items() if t == number))
        chosen = [Example(doc, hits.spell(hit), index.record_sources[hits.records[hit]]) for doc, hit in mine[:EXAMPLES_PER_TASK * 2]]
        if chosen:
            examples[name] = tuple(sorted(chosen, key=lambda e: (e.document, e.ngram))[:EXAMPLES_PER_TASK])
    keys, inverse = np.unique(hits.keys, return_inverse=True)
    documents_per_key = np.bincount(np.unique(np.stack([inverse, hits.documents]), axis=1)[0], minlength=len(keys))
    first_hit_of_key = np.full(len(keys), len(hits))
    np.minimum.at(first_hit_of_key, inverse, np.arange(len(hits)))
    top = np.lexsort((keys, -documents_per_key))[:NGRAMS_KEPT]
    ngrams = {hits.spell(int(first_hit_of_key[k])): (index.tasks[tasks[first_hit_of_key[k]]], int(documents_per_key[k]))
              for k in top}
    return Contamination(by_task, examples, ngrams)


@dataclass(frozen=True)
class Cut:
    text: str | None  # None: the document is dropped
    characters_cut: int
    splits: int


def word_runs(text: str) -> list[tuple[int, int]]:
    """Where the words of ``text`` are, as simplification leaves them: runs of characters
    that are neither its whitespace nor punctuation or symbols, in which a separator between
    digits stays (3.14 is one word, as its number becomes 0)."""
    runs, start = [], None
    for at, character in enumerate(text):
        breaks = character.isspace() or unicodedata.category(character)[0] in "PS"
        if breaks and character in NUMBER_SEPARATORS and start is not None and 0 < at < len(text) - 1:
            breaks = not (unicodedata.category(text[at - 1]) == "Nd" and unicodedata.category(text[at + 1]) == "Nd")
        if breaks and start is not None:
            runs.append((start, at))
            start = None
        elif not breaks and start is None:
            start = at
    if start is not None:
        runs.append((start, len(text)))
    return runs


def document_words(text: str, segmenter: tuple[str, str]) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of one document as ``dedup.words`` finds them, each with the characters of
    the text it came from (a segmented script's words share their run's)."""
    runs = word_runs(text)
    normalised = simplify(pa.array([text[a:b] for a, b in runs], pa.string())).to_pylist() if runs else []
    kind, language = segmenter
    found, spans = [], []
    for span, run in zip(runs, normalised):
        if kind == SPACED:
            pieces = [word for word in run.split(" ") if word]
        elif kind in SEGMENTERS and kind != NONE:
            pieces = [word for word in SEGMENTERS[kind](run, language) if word.strip()]
        else:
            pieces = [character for character in run if not character.isspace()]
        found += pieces
        spans += [span] * len(pieces)
    return found, spans


def cut(text: str, segmenter: tuple[str, str], index: NGramIndex) -> tuple[Cut, list[tuple[int, int]]]:
    """``text`` with every hit cut out by GPT-3's rule, and the hits' (record, first word)."""
    found, spans = document_words(text, segmenter)
    hashes = word_hashes(pa.array(found, pa.string()))
    removed, matched = [], []
    for length in index.lengths:
        starts = np.arange(max(len(hashes) - length + 1, 0))
        if not len(starts):
            continue
        records = index.lookup(keys_at(hashes, starts, length))
        for start in np.flatnonzero(records >= 0).tolist():
            matched.append((int(records[start]), start))
            removed.append((max(0, spans[start][0] - CUT_MARGIN), min(len(text), spans[start + length - 1][1] + CUT_MARGIN)))
    if not removed:
        return Cut(text, 0, 0), matched
    merged: list[list[int]] = []
    for begin, end in sorted(removed):
        if merged and begin <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    if len(merged) > MAX_SPLITS:
        return Cut(None, len(text), len(merged)), matched
    edges = [0, *(edge for span in merged for edge in span), len(text)]
    pieces = [text[edges[i]:edges[i + 1]].strip() for i in range(0, len(edges), 2)]
    kept = [piece for piece in pieces if len(piece) >= MIN_PIECE]
    if not kept:
        return Cut(None, len(text), len(merged)), matched
    result = PIECE_JOINER.join(kept)
    return Cut(result, len(text) - len(result), len(merged)), matched

"""Paragraph dedup as DCLM's BFF decides in ``old-both`` mode, over a whole run on many elements.

BFF reads documents one after the other with one Bloom filter: a paragraph (a document's
text from one newline to the next, the newline included) is removed when more than
``threshold`` of its word n-grams are in the filter already, and only a kept paragraph's
n-grams are added; a document whose n-grams were in the filter for more than ``threshold``
of them all is emptied. Words are the pieces between Unicode word boundaries that are not
whitespace (``text.boundaries``).

No element here holds the run's n-grams. A paragraph's *position* is its place in the run's
order (its curated file's index, then its ordinal among that file's paragraphs, rows in
order: ``positions``); the n-gram phase writes every n-gram with its position, bucketed by
hash; a bucket element marks each occurrence of an n-gram after the paragraph where it first
occurs (``seen_earlier``); the removal phase adds the marks up per paragraph and decides
(``decide``). The one difference from a filter read in the same order: an n-gram first seen
in a paragraph that was removed counts as seen here, while BFF never added it. A removed
paragraph has at most ``1 - threshold`` of its n-grams new, so this is rare; the tests
measure it against a sequential reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..text.ngrams import keys_at, window_keys
from .settings import DedupSettings, ParagraphSettings

ORDINAL_BITS = 36  # a position: file index << 36 | the paragraph's ordinal in its file


def positions(file: int, ordinals: np.ndarray) -> np.ndarray:
    """The run positions of the paragraphs ``ordinals`` of the ``file``-th curated file."""
    return (np.uint64(file) << np.uint64(ORDINAL_BITS)) | ordinals.astype(np.uint64)


def file_range(file: int) -> tuple[np.uint64, np.uint64]:
    """The positions of the ``file``-th curated file's paragraphs: [first, end)."""
    return np.uint64(file) << np.uint64(ORDINAL_BITS), np.uint64(file + 1) << np.uint64(ORDINAL_BITS)


def paragraph_count(text: str | None) -> int:
    """How many paragraphs BFF cuts ``text`` into (an empty text is one, empty)."""
    return 1 + (text or "").count("\n")


def paragraphs_of(text: str) -> list[str]:
    """The text's paragraphs as BFF cuts them: each after the first starts with its newline,
    so that joining any of them in order gives the text without the others."""
    parts = text.split("\n")
    return parts[:1] + ["\n" + part for part in parts[1:]]


@dataclass(frozen=True)
class BatchNGrams:
    """The n-grams of a batch of documents: each n-gram's key and its paragraph's ordinal in
    the batch, in the paragraphs' order; per paragraph, how many n-grams it has and whether
    it repeats one cut before (its n-grams left out); per document, how many paragraphs."""

    keys: np.ndarray  # uint64
    paragraph_of: np.ndarray  # int64, the batch's paragraph ordinal
    totals: np.ndarray  # uint32, n-grams per paragraph
    paragraphs: np.ndarray  # int64, paragraphs per document
    repeats: np.ndarray | None = None  # bool per paragraph; None: none


REPEATS_BUDGET = 1 << 25  # characters of paragraphs an element remembers (ExactRepeats)


class ExactRepeats:
    """The paragraphs one element has cut into n-grams, by their exact text, with their
    n-gram counts, so that a paragraph seen again (a site's banner, a footer, a copied page)
    is not cut again. Its n-grams are all at an earlier position of the run, where they were
    written, so each counts as seen: what its own rows would have told, and leaving them
    out changes no other paragraph's count. At most ``budget`` characters are remembered;
    past that, the memory starts again. Only batches given in position order may share one."""

    def __init__(self, budget: int = REPEATS_BUDGET):
        self.budget, self.totals, self.chars = budget, {}, 0

    def split(self, paragraphs: list[str]) -> tuple[list[int], np.ndarray, np.ndarray]:
        """(the ordinals of the paragraphs to cut, whether each paragraph is a repeat, and a
        repeat's n-gram count or the ordinal of its first copy in this batch, as -1 - ordinal)."""
        fresh, repeats, known = [], np.zeros(len(paragraphs), bool), np.zeros(len(paragraphs), np.int64)
        first: dict[str, int] = {}
        totals = self.totals
        for ordinal, paragraph in enumerate(paragraphs):
            if not paragraph:
                fresh.append(ordinal)
            elif (total := totals.get(paragraph)) is not None:
                repeats[ordinal], known[ordinal] = True, total
            elif (earlier := first.get(paragraph)) is not None:
                repeats[ordinal], known[ordinal] = True, -1 - earlier
            else:
                first[paragraph] = ordinal
                fresh.append(ordinal)
        return fresh, repeats, known

    def remember(self, paragraphs: list[str], ordinals: list[int], totals: np.ndarray) -> None:
        for ordinal, total in zip(ordinals, totals.tolist()):
            paragraph = paragraphs[ordinal]
            if paragraph:
                if self.chars + len(paragraph) > self.budget:
                    self.totals, self.chars = {}, 0
                self.totals[paragraph] = total
                self.chars += len(paragraph)


def batch_ngrams(texts: list[str | None], settings: ParagraphSettings,
                 repeats: ExactRepeats | None = None) -> BatchNGrams:
    """Every n-gram of every paragraph of ``texts`` (None: an empty text, one paragraph); with
    ``repeats``, a paragraph it knows, or one repeating an earlier paragraph of the batch,
    is not cut again: its n-grams are left out and its count is the first copy's."""
    split = [(text or "").split("\n") for text in texts]
    paragraphs = np.array([len(pieces) for pieces in split], dtype=np.int64)
    parts = [part for pieces in split for part in pieces]
    if repeats is None:
        keys, paragraph_of, totals = _cut(parts, settings)
        return BatchNGrams(keys, paragraph_of, totals, paragraphs)
    fresh, repeated, known = repeats.split(parts)
    if fresh:
        keys, cut_of, cut_totals = _cut([parts[i] for i in fresh], settings)
    else:
        keys, cut_of, cut_totals = np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.uint32)
    fresh_ordinals = np.array(fresh, dtype=np.int64)
    totals = np.zeros(len(parts), np.uint32)
    totals[fresh_ordinals] = cut_totals
    within = repeated & (known < 0)
    totals[repeated & ~within] = known[repeated & ~within]
    totals[within] = totals[-1 - known[within]]
    repeats.remember(parts, fresh, cut_totals)
    return BatchNGrams(keys, fresh_ordinals[cut_of], totals, paragraphs, repeated)


def _cut(paragraphs: list[str], settings: ParagraphSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The n-grams of ``paragraphs``: (keys, their paragraphs' ordinals, in order; n-grams per paragraph)."""
    from .words import paragraph_word_ids

    ids, counts_array = paragraph_word_ids(paragraphs)
    parents = np.repeat(np.arange(len(paragraphs)), counts_array)
    keys, paragraph_of = window_keys(ids, parents, settings.ngram)
    totals = np.maximum(counts_array - settings.ngram + 1, 0)
    short = np.flatnonzero((counts_array >= settings.min_ngram) & (counts_array < settings.ngram))
    if len(short):  # a paragraph shorter than an n-gram but not too short: one n-gram of all its words
        starts = np.concatenate([[0], np.cumsum(counts_array)])
        extra = [keys_at(ids[starts[p]:starts[p + 1]], np.array([0]), int(counts_array[p]))[0] for p in short]
        keys = np.concatenate([keys, np.array(extra, dtype=np.uint64)])
        paragraph_of = np.concatenate([paragraph_of, short])
        order = np.argsort(paragraph_of, kind="stable")
        keys, paragraph_of = keys[order], paragraph_of[order]
        totals[short] = 1
    return keys, paragraph_of.astype(np.int64), totals.astype(np.uint32)


def batch_line_keys(texts: list[str | None]) -> BatchNGrams:
    """One key per line of ``texts`` whose normalised text (``words.simplify``: lower case,
    numbers as 0, no punctuation or accents, whitespace collapsed) is not empty; a line
    without one is never removed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .words import simplify, word_hashes

    texts = [text or "" for text in texts]
    paragraphs = np.array([paragraph_count(text) for text in texts], dtype=np.int64)
    lines = simplify(pa.array([line for text in texts for line in text.split("\n")], pa.string()))
    keyed = pc.not_equal(lines, "").to_numpy(zero_copy_only=False)
    keys = word_hashes(lines.filter(pa.array(keyed))) if keyed.any() else np.zeros(0, np.uint64)
    return BatchNGrams(keys, np.flatnonzero(keyed).astype(np.int64), keyed.astype(np.uint32), paragraphs)


def batch_keys(texts: list[str | None], dedup: DedupSettings, repeats: ExactRepeats | None = None) -> BatchNGrams:
    """The keys of the run's span step: paragraph n-grams (``repeats``: see ``batch_ngrams``), or whole lines."""
    return batch_line_keys(texts) if dedup.lines else batch_ngrams(texts, dedup.paragraph, repeats)


@dataclass(frozen=True)
class SpanRule:
    """How a span step decides: a paragraph (a line) goes when more than ``threshold`` of its
    keys were seen earlier; a document is emptied when more than ``document_threshold`` of all
    its keys were (None: never for that), or when fewer than ``min_chars`` characters besides
    whitespace are left after a removal."""

    threshold: float
    document_threshold: float | None
    min_chars: int = 1

    @classmethod
    def of(cls, dedup: DedupSettings) -> SpanRule:
        if dedup.lines:
            return cls(0.0, None, dedup.line.min_chars)  # any earlier occurrence removes a line
        return cls(dedup.paragraph.threshold, dedup.paragraph.threshold)


def in_position_order(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``parts`` ((positions, keys) each) in one pair of arrays, sorted by
    position. A bucket reads each shard's rows file after file, each file's in order, so
    putting the files' runs in order is one copy; runs that overlap are sorted."""
    runs = []
    for positions_, keys in parts:
        files = positions_ >> np.uint64(ORDINAL_BITS)
        cuts = (files[1:] != files[:-1]) | (positions_[1:] < positions_[:-1])
        bounds = np.concatenate([[0], np.flatnonzero(cuts) + 1, [len(keys)]])
        del files, cuts
        runs += [(positions_[lo:hi], keys[lo:hi]) for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())
                 if hi > lo]
    if not runs:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    runs.sort(key=lambda run: int(run[0][0]))
    positions_, keys = (np.concatenate([run[side] for run in runs]) for side in (0, 1))
    if np.any(positions_[1:] < positions_[:-1]):
        order = np.argsort(positions_, kind="stable")
        positions_, keys = positions_[order], keys[order]
    return positions_, keys


def seen_earlier(positions_: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions, how many of their n-grams occur at an earlier position), for the
    paragraphs with any, sorted by position: every occurrence of a key after the paragraph
    where the key first occurs (another occurrence in that same paragraph is not earlier,
    as BFF looks a paragraph's n-grams up before adding them).

    Rows in position order are grouped by key with one sort of plain integers, each a key's
    high bits above its row's rank (about twice as fast as an argsort of the keys); the rare
    runs of keys that differ only in the bits left out are ordered again by the whole key."""
    n = len(keys)
    if not n:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint32)
    if np.any(positions_[1:] < positions_[:-1]):
        positions_, keys = in_position_order([(positions_, keys)])
    bits = np.uint64(max(1, (n - 1).bit_length()))
    low = (np.uint64(1) << bits) - np.uint64(1)
    rows = np.arange(n, dtype=np.uint64)
    packed = keys & ~low
    packed |= rows
    packed.sort()
    rows = np.bitwise_and(packed, low, out=rows).view(np.int64)
    whole = keys[rows]
    packed >>= bits
    new_key = whole[1:] != whole[:-1]
    mixed = new_key & (packed[1:] == packed[:-1])
    if mixed.any():
        runs = np.flatnonzero(np.concatenate([[True], packed[1:] != packed[:-1], [True]]))
        for run in np.unique(np.searchsorted(runs, np.flatnonzero(mixed) + 1, side="right") - 1):
            lo, hi = runs[run], runs[run + 1]
            order = np.lexsort((rows[lo:hi], whole[lo:hi]))
            rows[lo:hi], whole[lo:hi] = rows[lo:hi][order], whole[lo:hi][order]
        new_key = whole[1:] != whole[:-1]
    del mixed
    # Fresh memory is dear (page faults, huge-page compaction): the buffers done with are
    # reused, the packed keys' for the rows' positions and the whole keys' for run numbers.
    at = np.take(positions_, rows, out=packed)
    group = whole.view(np.int64)
    group[0] = 0
    np.cumsum(new_key, out=group[1:])
    first = at[np.flatnonzero(np.concatenate([[True], new_key]))][group]
    del group, whole, new_key
    later = np.zeros(n, bool)
    later[rows[at > first]] = True
    del at, first, rows, packed
    hit = positions_[later]
    edges = np.flatnonzero(np.concatenate([[True], hit[1:] != hit[:-1]])) if len(hit) else np.zeros(0, np.int64)
    return hit[edges], np.diff(np.append(edges, len(hit))).astype(np.uint32)


@dataclass(frozen=True)
class Decisions:
    """What a span step does to a batch of documents. Only the documents it changes have a
    text here; ``spans`` is filled when asked for."""

    changed: dict[int, str]  # a kept document's row in the batch -> its text without the removed paragraphs
    emptied: np.ndarray  # bool per document: too many of its n-grams seen before, or nothing left
    removed: np.ndarray  # paragraphs removed, per document
    paragraphs: int
    too_short: int  # paragraphs with no n-gram (always kept)
    bytes_removed: int  # UTF-8
    spans: dict[int, tuple[tuple[int, int], ...]]  # the removed paragraphs as BFF names them: UTF-8 byte offsets


def decide(texts: list[str | None], totals: np.ndarray, seen: np.ndarray, rule: SpanRule,
           with_spans: bool = False) -> Decisions:
    """A batch of documents as ``rule`` decides them (BFF's ``old-both`` for paragraphs):
    ``totals`` and ``seen`` are their paragraphs' keys and those of them seen at an earlier
    position, paragraph after paragraph. Decided over the whole batch at once; only a
    document that loses something is cut into its paragraphs."""
    counts = np.array([paragraph_count(text) for text in texts], dtype=np.int64)
    if int(counts.sum()) != len(totals):
        raise ValueError(f"{int(counts.sum())} paragraphs, but {len(totals)} n-gram totals")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    shares = np.divide(seen, totals, out=np.zeros(len(totals)), where=totals > 0)
    gone = (totals > 0) & (shares > rule.threshold)
    removed = np.add.reduceat(gone.astype(np.int64), starts) if len(texts) else np.zeros(0, np.int64)
    emptied = np.zeros(len(texts), bool)
    if rule.document_threshold is not None and len(texts):
        all_ngrams = np.add.reduceat(totals.astype(np.int64), starts)
        all_seen = np.add.reduceat(seen.astype(np.int64), starts)
        shares = np.divide(all_seen, all_ngrams, out=np.zeros(len(texts)), where=all_ngrams > 0)
        emptied = (all_ngrams > 0) & (shares > rule.document_threshold)
    changed, spans, bytes_removed = {}, {}, 0
    for row in np.flatnonzero((removed > 0) | emptied).tolist():
        text = texts[row] or ""
        parts = paragraphs_of(text)
        cut = gone[starts[row]:starts[row] + counts[row]].tolist()
        kept = "".join(part for part, lost in zip(parts, cut) if not lost)
        if not emptied[row] and too_little(kept, rule.min_chars):
            emptied[row] = True
        if emptied[row]:
            bytes_removed += len(text.encode())
        else:
            bytes_removed += sum(len(part.encode()) for part, lost in zip(parts, cut) if lost)
            changed[row] = kept
        if with_spans and removed[row]:
            ends = np.cumsum([len(part.encode()) for part in parts])
            spans[row] = tuple((int(end - len(part.encode())), int(end))
                               for part, end, lost in zip(parts, ends, cut) if lost)
    return Decisions(changed, emptied, removed, len(totals), int((totals == 0).sum()), bytes_removed, spans)


def too_little(text: str, min_chars: int) -> bool:
    """Whether ``text`` has fewer than ``min_chars`` characters besides whitespace."""
    if min_chars <= 1:
        return not text or text.isspace()
    return len("".join(text.split())) < min_chars

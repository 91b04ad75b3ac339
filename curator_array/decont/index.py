"""The n-gram index of the eval sets: every n-gram of every eval record as a 64-bit key,
sorted, each with the record it came from, and a bitmap of their top bits in front.

Keys are dedup's word hashes mixed in order (``text.ngrams.keys_at``), so an n-gram of a
document and the same n-gram of an eval record get the same key in every process. A
lookup looks at the bitmap first (about 64 bits a key: 1.5% of the n-grams that are not
in the index pass it) and does a binary search in the sorted keys for those that pass. A
worker holds 20 to 28 bytes per distinct n-gram (an 8-byte key, a 4-byte record number,
8 to 16 bytes of bitmap): 20 to 28 MB per million; the file holds the first 12.

What is indexed (``IndexRules``):

- every n-gram of the record's ``text``;
- by default, a text shorter than n words whole, when it has at least ``SHORT_MIN_WORDS``
  words (a document then hits it when it holds those words in a row), and n-grams without
  a letter never: after numbers are folded to 0 those are strings of digits, which match
  tables and page numbers everywhere;
- with ``overlap``, as datatrove's ``NGramsDecontIndexer`` indexes: also the n-grams that
  begin in the ``query`` and end in the ``text``, with short texts and letterless n-grams
  treated as datatrove treats them (no whole short texts; letterless n-grams kept).

The file is a fixed header, a JSON description and the two arrays, written the same way
for the same records, so its sha256 pins it; reading checks its length.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import CuratorArrayError
from ..dedup.words import SPACED, word_hashes, words
from ..text.ngrams import keys_at
from .evalsets import EvalSet
from .rules import IndexRules

MAGIC = b"curator-array decontamination index v1\n"
BITS_PER_KEY = 64  # the lookup's bitmap: 8 bytes a key, and about 1.5% of misses pass it
_LENGTH = struct.Struct("<Q")
SEGMENTER_OF_LANGUAGE = {"ja": "sudachi", "zh": "jieba"}  # eval records of other languages are split at spaces


class IndexFileError(CuratorArrayError):
    """An index file that is not whole: truncated, or not an index."""


@dataclass(frozen=True)
class NGramIndex:
    keys: np.ndarray  # uint64, sorted, distinct
    owners: np.ndarray  # int32: the record of each key (the first, in file order, that has it)
    lengths: tuple[int, ...]  # the n-gram lengths among the keys: n, and whole short texts'
    tasks: tuple[str, ...]
    record_tasks: np.ndarray  # int32: each record's task
    record_sources: tuple[str, ...]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def memory_bytes(self) -> int:
        """What a worker holds: the keys, their records, each record's task, the lookup's bitmap."""
        return int(self.keys.nbytes + self.owners.nbytes + self.record_tasks.nbytes + self._presence[0].nbytes)

    @cached_property
    def _presence(self) -> tuple[np.ndarray, np.uint64]:
        """A bitmap of the keys' top bits, about 64 bits per key: nearly every n-gram of a
        document is not in the index, and one look here says so without a binary search."""
        bits = max(16, int(np.ceil(np.log2(max(len(self.keys), 1) * BITS_PER_KEY))))
        shift = np.uint64(64 - bits)
        slots = self.keys >> shift
        bitmap = np.zeros((1 << bits) // 8, np.uint8)
        np.bitwise_or.at(bitmap, slots >> np.uint64(3), np.left_shift(1, (slots & np.uint64(7)).astype(np.uint8)))
        return bitmap, shift

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The record of each key in the index, -1 for keys it does not hold."""
        found = np.full(len(keys), -1, np.int64)
        if not len(self.keys) or not len(keys):
            return found
        bitmap, shift = self._presence
        slots = keys >> shift
        maybe = np.flatnonzero((bitmap[slots >> np.uint64(3)] >> (slots & np.uint64(7)).astype(np.uint8)) & 1)
        at = np.minimum(np.searchsorted(self.keys, keys[maybe]), len(self.keys) - 1)
        hit = self.keys[at] == keys[maybe]
        found[maybe[hit]] = self.owners[at[hit]]
        return found

    def task_of(self, records: np.ndarray) -> np.ndarray:
        return self.record_tasks[records]

    def to_bytes(self) -> bytes:
        description = json.dumps({"keys": len(self.keys), "records": len(self.record_sources), "lengths": self.lengths,
                                  "tasks": self.tasks, "sources": self.record_sources, "stats": self.stats},
                                 sort_keys=True, ensure_ascii=False).encode()
        return b"".join([MAGIC, _LENGTH.pack(len(description)), description, self.keys.astype("<u8").tobytes(),
                         self.owners.astype("<i4").tobytes(), self.record_tasks.astype("<i4").tobytes()])

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "index") -> NGramIndex:
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _LENGTH.size:
            raise IndexFileError(f"{name}: not a decontamination index")
        start = len(MAGIC) + _LENGTH.size
        (size,) = _LENGTH.unpack_from(data, len(MAGIC))
        try:
            description = json.loads(data[start:start + size])
        except ValueError:
            raise IndexFileError(f"{name}: truncated (its description is cut)") from None
        keys, records = description["keys"], description["records"]
        body = start + size
        if len(data) != body + 12 * keys + 4 * records:
            raise IndexFileError(f"{name}: truncated ({len(data)} bytes, {body + 12 * keys + 4 * records} expected)")
        return cls(np.frombuffer(data, "<u8", keys, body).astype(np.uint64),
                   np.frombuffer(data, "<i4", keys, body + 8 * keys).astype(np.int32),
                   tuple(description["lengths"]), tuple(description["tasks"]),
                   np.frombuffer(data, "<i4", records, body + 12 * keys).astype(np.int32),
                   tuple(description["sources"]), description["stats"])


def eval_segmenters(languages: Sequence[str | None]) -> list[tuple[str, str]]:
    return [(SEGMENTER_OF_LANGUAGE.get(code or "", SPACED), code or "en") for code in languages]


def record_words(texts: list[str], languages: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each word's hash, its text, and whether it holds a letter."""
    flat, parents = words(pa.array(texts, pa.string()), eval_segmenters(languages))
    letters = pc.match_substring_regex(flat, r"\pL").to_numpy(zero_copy_only=False) if len(flat) else np.zeros(0, bool)
    return word_hashes(flat), parents, letters


def build_index(evalset: EvalSet, rules: IndexRules) -> NGramIndex:
    """The index of every record of ``evalset`` under ``rules``."""
    n = rules.ngrams
    records = evalset.records
    tasks = evalset.tasks
    task_number = {task: number for number, task in enumerate(tasks)}
    languages = [record.language for record in records]
    hashes, parents, letters = record_words([record.text for record in records], languages)
    counts = np.bincount(parents, minlength=len(records))
    keys, owners = [], []
    lengths = {n}

    def add(found: np.ndarray, owner: np.ndarray) -> None:
        keys.append(found.astype(np.uint64))
        owners.append(owner.astype(np.int64))

    starts = np.arange(max(len(hashes) - n + 1, 0))
    inside = parents[starts] == parents[starts + n - 1] if len(starts) else np.zeros(0, bool)
    if rules.letters_only and len(starts):
        with_letter = np.concatenate([[0], np.cumsum(letters)])
        inside &= with_letter[starts + n] - with_letter[starts] > 0
    add(keys_at(hashes, starts[inside], n), parents[starts[inside]])

    skipped_short = 0
    first_word = np.concatenate([[0], np.cumsum(counts)])
    for record in np.flatnonzero(counts < n):
        size = int(counts[record])
        if rules.short_min_words is None:
            continue
        if size < rules.short_min_words or (rules.letters_only and not letters[first_word[record]:first_word[record + 1]].any()):
            skipped_short += 1
            continue
        add(keys_at(hashes[first_word[record]:first_word[record + 1]], np.zeros(1, np.int64), size), np.array([record]))
        lengths.add(size)

    if rules.overlap:
        queried = [i for i, record in enumerate(records) if record.query]
        query_hashes, query_parents, _ = record_words([records[i].query for i in queried],
                                                      [records[i].language for i in queried])
        query_first = np.concatenate([[0], np.cumsum(np.bincount(query_parents, minlength=len(queried)))])
        for position, record in enumerate(queried):
            query = query_hashes[query_first[position]:query_first[position + 1]][-(n - 1):] if n > 1 else query_hashes[:0]
            answer = hashes[first_word[record]:first_word[record + 1]][:n - 1]
            joined = np.concatenate([query, answer])
            # the n-grams that begin in the query and end in the answer
            begins = np.arange(max(0, len(query) - n + 1), len(query))
            begins = begins[begins + n <= len(joined)]
            if len(begins):
                add(keys_at(joined, begins, n), np.full(len(begins), record))

    all_keys = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    all_owners = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    order = np.lexsort((all_owners, all_keys))
    all_keys, all_owners = all_keys[order], all_owners[order]
    first = np.ones(len(all_keys), bool)
    first[1:] = all_keys[1:] != all_keys[:-1]
    record_tasks = np.array([task_number[record.task] for record in records], np.int32)
    per_task = np.bincount(record_tasks[all_owners[first]], minlength=len(tasks)) if len(tasks) else []
    stats = {"records": len(records), "ngrams": int(first.sum()), "short_texts_skipped": skipped_short,
             **{f"records_{reason}": count for reason, count in evalset.skipped.items()},
             "ngrams_by_task": {task: int(count) for task, count in zip(tasks, per_task)}}
    return NGramIndex(all_keys[first], all_owners[first].astype(np.int32), tuple(sorted(lengths, reverse=True)), tasks,
                      record_tasks, tuple(record.source for record in records), stats)

"""A corpus with planted duplicates, and how well a dedup run found them.

Shared by the dedup unit, integration and SLURM tests and by ``bench/bench_dedup.py``.
Every copy sits in another file than its original, so it lands in another source task
(and usually another shard) than the document it duplicates.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    return ["".join(rng.choices("abcdefghijklmnopqrstuvwxyzäöü", k=rng.randint(2, 9))) for _ in range(size)]


def sentences(rng: random.Random, words: list[str], count: int) -> str:
    return " ".join(" ".join(rng.choices(words, k=rng.randint(8, 16))).capitalize() + "." for _ in range(count))


def planted(seed: int = 5, originals: int = 120, scale: int = 1):
    """Documents with known duplicates: (texts, for each text the index of its original or None).

    Per 120 originals (times ``scale``): 20 exact copies, 20 that differ only in case,
    punctuation and whitespace, 40 with about 1% of their words edited (all three must be
    removed), and 30 pages that share long boilerplate but whose main texts differ in more
    than 30% of their words (all must be kept).
    """
    rng = random.Random(seed)
    words = vocabulary(rng)
    texts, original_of = [], []

    def add(text, original=None):
        texts.append(text)
        original_of.append(original)

    count = originals * scale
    first = [sentences(rng, words, 25) for _ in range(count)]
    for text in first:
        add(text)
    for block in range(scale):
        base = block * originals
        for index in range(base, base + originals // 6):  # exact copies
            add(first[index], index)
        for index in range(base + originals // 6, base + originals // 3):  # case, punctuation, whitespace
            add("  " + first[index].upper().replace(".", " !!").replace(" ", "\n  "), index)
        for index in range(base + originals // 3, base + 2 * originals // 3):  # about 1% of the words edited
            edited = first[index].split(" ")
            for position in rng.sample(range(len(edited)), max(1, len(edited) // 100)):
                edited[position] = rng.choice(words)
            add(" ".join(edited), index)
        boilerplate = sentences(rng, words, 8), sentences(rng, words, 4)
        for _ in range(originals // 4):  # long shared boilerplate, main texts of their own
            add(f"{boilerplate[0]} {sentences(rng, words, 20)} {boilerplate[1]}")
    return texts, original_of


@dataclass(frozen=True)
class PlantedCorpus:
    """Where each document went: ``original_of`` maps a copy's id to its original's id."""

    ids: tuple[str, ...]
    original_of: dict[str, str]
    kinds: dict[str, str]  # copy id → exact, case, edited

    def score(self, kept_ids: set[str]) -> tuple[float, float]:
        """(precision, recall) of the removed documents: a removal is right when it is one of a
        planted pair whose other document is kept; a pair is found when exactly one is kept."""
        removed = set(self.ids) - kept_ids
        right = {i for i in removed if (i in self.original_of and self.original_of[i] in kept_ids)
                 or any(self.original_of[c] == i and c in kept_ids for c in self._copies_of(i))}
        found = sum(1 for copy, original in self.original_of.items() if (copy in kept_ids) != (original in kept_ids))
        return (len(right) / len(removed) if removed else 1.0), found / len(self.original_of)

    def _copies_of(self, original: str) -> list[str]:
        return [c for c, o in self.original_of.items() if o == original]


def write_corpus(directory: Path, files: int = 8, seed: int = 5, scale: int = 1, prefix: str = "doc") -> PlantedCorpus:
    """The planted documents as JSON Lines files with ``id``, ``text`` and ``n`` fields."""
    texts, original_of = planted(seed, scale=scale)
    directory.mkdir(parents=True, exist_ok=True)
    ids = [f"{prefix}-{i:06d}" for i in range(len(texts))]
    file_of = [i % files for i in range(len(texts))]
    for i, original in enumerate(original_of):
        if original is not None:  # never in its original's file
            file_of[i] = (file_of[original] + 1 + i % (files - 1)) % files
    handles = [open(directory / f"part-{f:03d}.jsonl", "w", encoding="utf-8") for f in range(files)]
    try:
        for i, text in enumerate(texts):
            handles[file_of[i]].write(json.dumps({"id": ids[i], "text": text, "n": i}, ensure_ascii=False) + "\n")
    finally:
        for handle in handles:
            handle.close()
    originals = sum(1 for o in original_of if o is None) - 30 * scale  # the boilerplate pages are no originals
    kinds = {}
    for i, original in enumerate(original_of):
        if original is not None:
            offset = (i - originals) % 110  # 20 exact, 20 case, 40 edited, 30 boilerplate per block
            kinds[ids[i]] = "exact" if offset < 20 else "case" if offset < 40 else "edited"
    return PlantedCorpus(tuple(ids), {ids[i]: ids[o] for i, o in enumerate(original_of) if o is not None}, kinds)


def write_doubled_corpus(directory: Path, files: int = 8) -> None:
    """The planted corpus twice (ids ``a-…`` and ``b-…``, in the same files): a cluster then
    has four members, each a copy of every other, a graph the components phase settles only
    in several steps (a pair is a star from the start)."""
    write_corpus(directory, files, prefix="a")
    second = directory.with_name(directory.name + "-b")
    write_corpus(second, files, prefix="b")
    for part in sorted(second.iterdir()):
        with open(directory / part.name, "a", encoding="utf-8") as handle:
            handle.write(part.read_text(encoding="utf-8"))
        part.unlink()
    second.rmdir()

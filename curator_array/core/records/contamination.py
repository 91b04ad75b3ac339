"""What decontamination found, as task records and manifests keep it and status adds it up.

Per eval task: the documents that hit it, the n-gram occurrences matched, the characters
removed (a dropped document's whole text; in cut mode, what was cut), up to
``EXAMPLES_PER_TASK`` example hits, and the n-grams that hit most often. Examples and
n-grams are chosen by a fixed order (document id, n-gram text), never by arrival, so the
report of a run is the same however it was sharded, with one exception said in the docs:
each record keeps only its ``NGRAMS_KEPT`` most frequent n-grams, so the run-wide list is
exact for every n-gram that is among the top ones of each shard that saw it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EXAMPLES_PER_TASK = 5
NGRAMS_KEPT = 1000


@dataclass(frozen=True)
class TaskHits:
    documents: int = 0
    ngrams: int = 0
    characters_cut: int = 0

    def __add__(self, other: TaskHits) -> TaskHits:
        return TaskHits(self.documents + other.documents, self.ngrams + other.ngrams,
                        self.characters_cut + other.characters_cut)


@dataclass(frozen=True)
class Example:
    """One hit: the document, the n-gram as the document's words spell it, the eval record."""

    document: str
    ngram: str
    record: str

    def to_json(self) -> list[str]:
        return [self.document, self.ngram, self.record]


@dataclass(frozen=True)
class Contamination:
    tasks: Mapping[str, TaskHits] = field(default_factory=dict)
    examples: Mapping[str, tuple[Example, ...]] = field(default_factory=dict)
    ngrams: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # n-gram → (task, documents)

    def __bool__(self) -> bool:
        return bool(self.tasks)

    def __add__(self, other: Contamination) -> Contamination:
        if not other:
            return self
        if not self:
            return other
        tasks = dict(self.tasks)
        for name, hits in other.tasks.items():
            tasks[name] = tasks.get(name, TaskHits()) + hits
        examples = {}
        for name in {*self.examples, *other.examples}:
            merged = {*self.examples.get(name, ()), *other.examples.get(name, ())}
            examples[name] = tuple(sorted(merged, key=lambda e: (e.document, e.ngram))[:EXAMPLES_PER_TASK])
        ngrams = dict(self.ngrams)
        for text, (task, documents) in other.ngrams.items():
            known_task, known = ngrams.get(text, (task, 0))
            ngrams[text] = (known_task, known + documents)
        return Contamination(tasks, examples, top_ngrams(ngrams))

    def top_tasks(self) -> list[tuple[str, TaskHits]]:
        """The tasks by documents hit, most first."""
        return sorted(self.tasks.items(), key=lambda item: (-item[1].documents, item[0]))

    def to_json(self) -> dict[str, Any]:
        return {
            "tasks": {name: [hits.documents, hits.ngrams, hits.characters_cut] for name, hits in sorted(self.tasks.items())},
            "examples": {name: [e.to_json() for e in found] for name, found in sorted(self.examples.items())},
            "ngrams": [[text, task, documents] for text, (task, documents) in self.ngrams.items()],
        }

    @classmethod
    def from_json(cls, payload: Any) -> Contamination:
        if not isinstance(payload, Mapping):
            return cls()
        tasks = {str(name): TaskHits(*map(int, values)) for name, values in (payload.get("tasks") or {}).items()}
        examples = {str(name): tuple(Example(*map(str, e)) for e in found)
                    for name, found in (payload.get("examples") or {}).items()}
        ngrams = {str(text): (str(task), int(documents)) for text, task, documents in payload.get("ngrams") or ()}
        return cls(tasks, examples, ngrams)


def top_ngrams(ngrams: Mapping[str, tuple[str, int]], kept: int = NGRAMS_KEPT) -> dict[str, tuple[str, int]]:
    """The ``kept`` n-grams that hit the most documents, most first (ties by text)."""
    ranked = sorted(ngrams.items(), key=lambda item: (-item[1][1], item[0]))[:kept]
    return dict(ranked)

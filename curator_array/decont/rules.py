"""What the index of the eval sets holds: n, and whether it is built as datatrove builds it."""

from __future__ import annotations

from dataclasses import dataclass

SHORT_MIN_WORDS = 8


@dataclass(frozen=True)
class IndexRules:
    ngrams: int
    overlap: bool = False

    @property
    def short_min_words(self) -> int | None:
        return None if self.overlap else SHORT_MIN_WORDS

    @property
    def letters_only(self) -> bool:
        return not self.overlap

"""How a run removes duplicates: one settings type for the dedup phases, with MinHash's inside.

Plain values, importable without numpy: the dedup options (``run.phases.signatures``) take
their defaults from these fields, the pipeline fingerprint pins them in ``run.json``, and
every dedup phase reads them from there. The MinHash defaults are FineWeb's (word 5-grams, 14 bands of 8 hashes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..text.language import DEFAULT_LANGUAGE

MODES = ("exact", "fuzzy")


@dataclass(frozen=True)
class MinHashSettings:
    """How signatures are made: shingles of ``ngram`` words, ``bands`` LSH bands of ``rows``
    hashes each, hash functions drawn from ``seed``."""

    ngram: int = 5
    bands: int = 14
    rows: int = 8
    seed: int = 1

    def __post_init__(self) -> None:
        for item in fields(self):
            if item.name != "seed" and getattr(self, item.name) < 1:
                raise ValueError(f"dedup {item.name} must be at least 1, got {getattr(self, item.name)}")

    @property
    def hashes(self) -> int:
        return self.bands * self.rows


@dataclass(frozen=True)
class DedupSettings:
    """The dedup phases of a run: ``mode`` exact (the normalised text) or fuzzy (MinHash).

    ``buckets`` None means one bucket element per curation shard; ``components_elements``
    above 1 finds the clusters over that many elements in rounds; ``verify`` confirms each
    candidate pair (fuzzy: by a true Jaccard similarity of at least ``threshold``);
    ``against`` names earlier runs' checkpoints whose documents this run's copies must not
    duplicate; ``language`` is the language of documents without a ``language`` field,
    whose words are split as the quality filters split that language's; ``keep_removed``
    writes the removed documents aside for an audit.
    """

    mode: str
    minhash: MinHashSettings = field(default_factory=MinHashSettings)
    buckets: int | None = None
    components_elements: int = 1
    verify: bool = False
    threshold: float = 0.75
    against: tuple[str, ...] = ()
    language: str = DEFAULT_LANGUAGE
    keep_removed: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"dedup mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.components_elements < 1:
            raise ValueError(f"dedup components_elements must be at least 1, got {self.components_elements}")

    @property
    def fuzzy(self) -> MinHashSettings | None:
        """The MinHash settings of a fuzzy run; None for exact dedup (one key per text)."""
        return self.minhash if self.mode == "fuzzy" else None

    def to_json(self) -> dict[str, Any]:
        """Flat, as ``run.json`` pins it (and as its changes are named: ``dedup.bands``)."""
        flat = {item.name: getattr(self, item.name) for item in fields(self) if item.name != "minhash"}
        return {**flat, **{item.name: getattr(self.minhash, item.name) for item in fields(self.minhash)},
                "against": list(self.against)}

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> DedupSettings:
        minhash = MinHashSettings(**{f.name: payload[f.name] for f in fields(MinHashSettings) if f.name in payload})
        own = {f.name: payload[f.name] for f in fields(cls) if f.name in payload and f.name != "minhash"}
        return replace(cls(**own, minhash=minhash), against=tuple(payload.get("against") or ()))

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """Each field's default, flat, as ``to_json`` names them (the mode has none)."""
        defaults = {item.name: item.default for item in fields(MinHashSettings)}
        defaults.update({item.name: item.default for item in fields(cls) if item.name != "minhash"})
        defaults["mode"] = None
        return defaults

    @classmethod
    def from_options(cls, given: Mapping[str, Any]) -> DedupSettings:
        """The settings the run options give, by field (``bands``, ...): the earlier runs'
        checkpoints given with ``against`` are pinned as absolute paths."""
        against = tuple(str(Path(path).resolve()) for path in given.get("against") or ())
        return cls.from_json({**given, "against": against})

    def signature_settings(self) -> dict[str, Any]:
        """What must be equal for two runs' signatures to be compared (``--dedup-against``)."""
        if self.fuzzy is None:
            return {"mode": self.mode}
        return {"mode": self.mode, "language": self.language,
                **{f.name: getattr(self.minhash, f.name) for f in fields(self.minhash)}}

    def bucket_count(self, shards_total: int) -> int:
        return self.buckets or shards_total

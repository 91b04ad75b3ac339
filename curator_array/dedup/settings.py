"""How a run removes duplicates: one settings type for the dedup phases, with MinHash's inside.

Plain values, importable without numpy: the dedup options (``run.phases.signatures``) take
their defaults from these fields, the pipeline fingerprint pins them in ``run.json``, and
every dedup phase reads them from there. The MinHash defaults are FineWeb's (word 5-grams, 14 bands of 8 hashes);
the paragraph defaults DCLM-Baseline's (BFF ``old-both``: word 13-grams, more than 80% seen).

A run's dedup is one or more steps (``--dedup paragraphs,fuzzy``), always run in the order of
``STEPS``: first what removes parts of documents, then what removes whole documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.pinned_settings import PinnedSettings
from ..text.language import DEFAULT_LANGUAGE

MODES = ("exact", "fuzzy")  # the whole-document steps; a run has at most one
URL_PRIORITIES = ("longest", "newest")


def parse_steps(given: str | tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """(the document step or None, the steps before it in run order) of ``--dedup``'s value."""
    steps = tuple(given.split(",")) if isinstance(given, str) else tuple(given)
    steps = tuple(step.strip() for step in steps if step.strip())
    unknown = [step for step in steps if step not in STEPS]
    if unknown or not steps:
        raise ConfigError(f"--dedup: {(unknown or [''])[0]!r} is not one of {', '.join(STEPS)}")
    documents = [step for step in steps if step in MODES]
    if len(documents) > 1:
        raise ConfigError(f"--dedup {','.join(steps)}: {' and '.join(documents)} both remove whole documents; "
                          "choose one")
    if all(step in steps for step in BELOW_DOCUMENT):
        raise ConfigError(f"--dedup {','.join(steps)}: lines and paragraphs both cut documents at newlines; a run "
                          "does one of them")
    return (documents[0] if documents else None), tuple(step for step in EARLY_STEPS if step in steps)


@dataclass(frozen=True)
class UrlSettings:
    """URL dedup: of the documents with one normalised URL (``dedup.urls``), the one with the
    longest text is kept (``keep`` ``longest``), or the one with the newest ``date`` field
    (``newest``; a document without a date is the oldest); ties go to the first in the run's
    order."""

    keep: str = "longest"

    def __post_init__(self) -> None:
        if self.keep not in URL_PRIORITIES:
            raise ValueError(f"the URL dedup keeps one of {', '.join(URL_PRIORITIES)}, not {self.keep!r}")


@dataclass(frozen=True)
class ParagraphSettings:
    """BFF ``old-both``: a paragraph (text between newlines) whose word ``ngram``-grams were
    seen earlier in the run for more than ``threshold`` of them is removed, and a document
    whose n-grams were for more than ``threshold`` of them is emptied; a paragraph of at least
    ``min_ngram`` but fewer than ``ngram`` words is one n-gram of them all, a shorter one has
    none (it is always kept)."""

    ngram: int = 13
    min_ngram: int = 13
    threshold: float = 0.8

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.ngram:
            raise ValueError(f"paragraph dedup needs 1 <= min n-gram ({self.min_ngram}) <= n-gram ({self.ngram})")
        if not 0 <= self.threshold < 1:
            raise ValueError(f"the paragraph dedup threshold must be in [0, 1), got {self.threshold}")


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
class LineSettings:
    """Exact line dedup (CCNet's): a line whose normalised text occurred in an earlier line of
    the run is removed; a document left with fewer than ``min_chars`` characters besides
    whitespace is dropped."""

    min_chars: int = 1

    def __post_init__(self) -> None:
        if self.min_chars < 1:
            raise ValueError(f"the line dedup's min_chars must be at least 1, got {self.min_chars}")


# Each step before the document step, in run order: the field of ``DedupSettings`` that holds
# its settings (their flat names in ``run.json`` start with it) and their type. Pinned only when
# the run has the step. ``lines`` and ``paragraphs`` remove parts of documents (one a run).
EARLY_SETTINGS = {"urls": ("url", UrlSettings), "lines": ("line", LineSettings),
                  "paragraphs": ("paragraph", ParagraphSettings)}
EARLY_STEPS = tuple(EARLY_SETTINGS)
BELOW_DOCUMENT = ("lines", "paragraphs")  # they remove parts of documents, on the same phases: one a run
STEPS = EARLY_STEPS + MODES
NESTED = ("minhash", *(name for name, _ in EARLY_SETTINGS.values()))


def _flat(name: str, settings: Any) -> dict[str, Any]:
    return {f"{name}_{item.name}": getattr(settings, item.name) for item in fields(settings)}


@dataclass(frozen=True)
class DedupSettings(PinnedSettings):
    """The dedup phases of a run: ``mode`` exact (the normalised text) or fuzzy (MinHash), or
    None when no step after the others removes whole documents; ``early`` the steps done
    before it, in run order: ``urls`` (with ``url``'s settings), then ``lines`` (``line``'s) or
    ``paragraphs`` (``paragraph``'s), which remove parts of documents.

    ``buckets`` None means one bucket element per curation shard; ``components_elements``
    above 1 finds the clusters over that many elements in rounds; ``verify`` confirms each
    candidate pair (fuzzy: by a true Jaccard similarity of at least ``threshold``);
    ``against`` names earlier runs' checkpoints whose documents this run's copies must not
    duplicate; ``language`` is the language of documents without a ``language`` field,
    whose words are split as the quality filters split that language's; ``keep_removed``
    writes the removed documents aside for an audit.
    """

    mode: str | None
    minhash: MinHashSettings = field(default_factory=MinHashSettings)
    buckets: int | None = None
    components_elements: int = 1
    verify: bool = False
    threshold: float = 0.75
    against: tuple[str, ...] = ()
    language: str = DEFAULT_LANGUAGE
    keep_removed: bool = False
    early: tuple[str, ...] = ()  # pinned only when there are some: a run pinned before them reads the same
    paragraph: ParagraphSettings = field(default_factory=ParagraphSettings)
    line: LineSettings = field(default_factory=LineSettings)
    url: UrlSettings = field(default_factory=UrlSettings)

    def __post_init__(self) -> None:
        if self.mode not in MODES and not (self.mode is None and self.early):
            raise ValueError(f"dedup mode {self.mode!r} is not one of {', '.join(MODES)}")
        if any(step not in EARLY_STEPS for step in self.early):
            raise ValueError(f"dedup steps {self.early} are not among {', '.join(EARLY_STEPS)}")
        if self.components_elements < 1:
            raise ValueError(f"dedup components_elements must be at least 1, got {self.components_elements}")

    @property
    def steps(self) -> tuple[str, ...]:
        """Every step, in the order the run does them."""
        return self.early + ((self.mode,) if self.mode else ())

    @property
    def paragraphs(self) -> ParagraphSettings | None:
        """The paragraph step's settings; None without it."""
        return self.paragraph if "paragraphs" in self.early else None

    @property
    def lines(self) -> LineSettings | None:
        """The line step's settings; None without it."""
        return self.line if "lines" in self.early else None

    @property
    def urls(self) -> UrlSettings | None:
        """The URL step's settings; None without it."""
        return self.url if "urls" in self.early else None

    @property
    def below_documents(self) -> str | None:
        """The step that removes parts of documents (``lines`` or ``paragraphs``), if any."""
        return next((step for step in self.early if step in BELOW_DOCUMENT), None)

    @property
    def fuzzy(self) -> MinHashSettings | None:
        """The MinHash settings of a fuzzy run; None for exact dedup (one key per text)."""
        return self.minhash if self.mode == "fuzzy" else None

    def to_json(self) -> dict[str, Any]:
        """Flat, as ``run.json`` pins it (and as its changes are named: ``dedup.bands``): the
        nested settings of each step under their step's prefix, which the base's codec does
        not do."""
        flat = {item.name: getattr(self, item.name) for item in fields(self) if item.name not in NESTED}
        flat = {**flat, **{item.name: getattr(self.minhash, item.name) for item in fields(self.minhash)},
                "against": list(self.against), "early": list(self.early)}
        for step, (name, _) in EARLY_SETTINGS.items():
            if step in self.early:
                flat.update(_flat(name, getattr(self, name)))
        if not self.early:
            del flat["early"]
        return flat

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> DedupSettings:
        minhash = MinHashSettings(**{f.name: payload[f.name] for f in fields(MinHashSettings) if f.name in payload})
        nested = {name: kind(**{f.name: payload[f"{name}_{f.name}"] for f in fields(kind)
                                if payload.get(f"{name}_{f.name}") is not None})
                  for name, kind in EARLY_SETTINGS.values()}
        own = {f.name: payload[f.name] for f in fields(cls) if f.name in payload and f.name not in NESTED}
        return replace(cls(**own, minhash=minhash, **nested), against=tuple(payload.get("against") or ()),
                       early=tuple(payload.get("early") or ()))

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """Each field's default, flat, as ``to_json`` names them (the mode has none)."""
        defaults = {item.name: item.default for item in fields(MinHashSettings)}
        for name, kind in EARLY_SETTINGS.values():
            defaults.update(_flat(name, kind()))
        defaults.update({item.name: item.default for item in fields(cls) if item.name not in NESTED})
        defaults["mode"] = None
        return defaults

    @classmethod
    def from_options(cls, given: Mapping[str, Any]) -> DedupSettings:
        """The settings the run options give, by field (``bands``, ...): the earlier runs'
        checkpoints given with ``against`` are pinned as absolute paths."""
        against = tuple(str(Path(path).resolve()) for path in given.get("against") or ())
        mode, early = parse_steps(given["mode"])
        for step, (name, kind) in EARLY_SETTINGS.items():
            unused = [flat for flat, default in _flat(name, kind()).items()
                      if given.get(flat) not in (None, default) and step not in early]
            if unused:
                raise ConfigError(f"--dedup-{unused[0].replace('_', '-')}: it needs the {step} step "
                                  f"(--dedup {step}{',' + mode if mode else ''})")
        return cls.from_json({**given, "against": against, "mode": mode, "early": early})

    def signature_settings(self) -> dict[str, Any]:
        """What must be equal for two runs' signatures to be compared (``--dedup-against``)."""
        if self.fuzzy is None:
            return {"mode": self.mode}
        return {"mode": self.mode, "language": self.language,
                **{f.name: getattr(self.minhash, f.name) for f in fields(self.minhash)}}

    def bucket_count(self, shards_total: int) -> int:
        return self.buckets or shards_total

"""The per-language rules of the quality filters: one type, one table, data not code.

``LanguageRules`` is the one list of keys: its fields. ``language_rules.toml`` (next to
this module) gives their values per language; a user's file of the same form overrides any
key of any language (``--quality-settings``). A language the table does not name takes
``[default]``, and every language takes ``[default]``'s value for a key it does not set.
The rules in force are part of each filter's fingerprint, so they are pinned with the run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import tomllib

from ...core.errors import ConfigError
from ...text.segmenters import KINDS

TABLE = Path(__file__).with_name("language_rules.toml")
DEFAULT = "default"
# The key ``segmenter`` had before it was named so: read in users' files, and written in
# fingerprints, so runs pinned with it stay the same runs.
SEGMENTER_KEY_BEFORE = "tokenizer"


@dataclass(frozen=True)
class LanguageRules:
    """How the quality filters read one language: its segmenter and stop words, the Gopher
    limits (a fraction of 0 turns a repetition rule off), whether C4's rules apply, and the
    FineWeb quality limits."""

    segmenter: str
    stop_words: tuple[str, ...]
    c4: bool
    min_stop_words: float
    min_words: float
    max_words: float
    min_avg_word_length: float
    max_avg_word_length: float
    max_hash_ratio: float
    max_ellipsis_ratio: float
    max_bullet_lines: float
    max_ellipsis_lines: float
    min_alphabetic_words: float
    dup_line_frac: float
    dup_para_frac: float
    dup_line_char_frac: float
    dup_para_char_frac: float
    top_n_grams: tuple[tuple[int, float], ...]  # (n, the largest share of characters in its most frequent n-gram)
    dup_n_grams: tuple[tuple[int, float], ...]  # (n, the largest share of characters in repeated n-grams)
    line_punct_thr: float  # FineWeb quality: the least share of lines ending a sentence
    short_line_thr: float  # the largest share of lines of at most 30 characters (1: off)
    char_duplicates_ratio: float  # the largest share of characters in repeated lines
    new_line_ratio: float  # the most line breaks per word

    @classmethod
    def from_table(cls, values: dict[str, Any], where: str) -> LanguageRules:
        missing = [f.name for f in fields(cls) if f.name not in values]
        if missing:
            raise ConfigError(f"{where}: missing {', '.join(missing)} (set them in [{DEFAULT}])")
        return cls(**{f.name: _converted(f.type, values[f.name]) for f in fields(cls)})

    def limit(self, key: str, n: int) -> float | None:
        """The limit of n-gram rule ``key`` (``top_n_grams`` or ``dup_n_grams``) for n, if any."""
        return dict(getattr(self, key)).get(n)

    def to_json(self) -> dict[str, Any]:
        rules = asdict(self)
        return {SEGMENTER_KEY_BEFORE if key == "segmenter" else key: value for key, value in rules.items()}


KEYS = {f.name: f.type for f in fields(LanguageRules)}


def _converted(kind: str, value: Any) -> Any:
    if kind.startswith("tuple[tuple"):
        return tuple((int(n), float(limit)) for n, limit in value)
    if kind.startswith("tuple"):
        return tuple(value)
    return value


def _check(where: str, key: str, value: Any) -> None:
    """A value of the form its field's type asks for, or ConfigError naming where it is."""
    kind = KEYS[key]
    if key == "segmenter":
        ok, want = value in KINDS, f"{value!r} is not one of {', '.join(KINDS)}"
    elif kind == "bool":
        ok, want = isinstance(value, bool), "must be true or false"
    elif kind == "float":
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and value >= 0
        want = f"must be a number >= 0, got {value!r}"
    elif kind.startswith("tuple[tuple"):
        ok = isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and p[0] >= 1
            and isinstance(p[1], (int, float)) for p in value)
        want = "must be a list of [n, limit] pairs"
    else:
        ok, want = isinstance(value, list) and all(isinstance(w, str) for w in value), "must be a list of words"
    if not ok:
        raise ConfigError(f"{where}: {want}")


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read quality settings {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    for language, settings in data.items():
        if not isinstance(settings, dict):
            raise ConfigError(f"{path}: [{language}] must be a table of settings")
        if SEGMENTER_KEY_BEFORE in settings:
            settings["segmenter"] = settings.pop(SEGMENTER_KEY_BEFORE)
        for key, value in settings.items():
            if key not in KEYS:
                raise ConfigError(f"{path}: [{language}] {key}: unknown key (known: {', '.join(sorted(KEYS))})")
            _check(f"{path}: [{language}] {key}", key, value)
    return data


def language_rules(overrides: str | Path | None = None) -> dict[str, LanguageRules]:
    """Every language's settings: the table, with ``overrides`` on top, over ``[default]``."""
    table = _read(TABLE)
    if overrides:
        for language, settings in _read(Path(overrides)).items():
            table.setdefault(language, {}).update(settings)
    default = table[DEFAULT]
    return {language: LanguageRules.from_table({**default, **settings}, f"quality settings [{language}]")
            for language, settings in table.items()}


def for_language(settings: dict[str, LanguageRules], language: str) -> LanguageRules:
    return settings.get(language) or settings[DEFAULT]

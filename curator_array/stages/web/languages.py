"""The per-language settings of the quality filters: one table, data not code.

``language_settings.toml`` (next to this module) holds them; a user's file of the same form
overrides any key of any language (``--quality-settings``). A language the table does not
name takes ``[default]``. The result is a plain dict per language, so it is part of each
filter's fingerprint and pinned with the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib

from ...core.errors import ConfigError
from .tokenizers import KINDS

TABLE = Path(__file__).with_name("language_settings.toml")
DEFAULT = "default"
NUMBER_KEYS = ("min_stop_words", "min_words", "max_words", "min_avg_word_length", "max_avg_word_length",
               "max_hash_ratio", "max_ellipsis_ratio", "max_bullet_lines", "max_ellipsis_lines",
               "min_alphabetic_words", "dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac")
PAIR_KEYS = ("top_n_grams", "dup_n_grams")


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
        _check(path, language, settings)
    return data


def _check(path: Path, language: str, settings: dict[str, Any]) -> None:
    known = {"tokenizer", "stop_words", "c4", *NUMBER_KEYS, *PAIR_KEYS}
    for key, value in settings.items():
        where = f"{path}: [{language}] {key}"
        if key not in known:
            raise ConfigError(f"{where}: unknown key (known: {', '.join(sorted(known))})")
        if key == "tokenizer" and value not in KINDS:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(KINDS)}")
        if key == "stop_words" and not (isinstance(value, list) and all(isinstance(w, str) for w in value)):
            raise ConfigError(f"{where}: must be a list of words")
        if key == "c4" and not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false")
        if key in NUMBER_KEYS and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise ConfigError(f"{where}: must be a number >= 0, got {value!r}")
        if key in PAIR_KEYS and not (isinstance(value, list) and all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and p[0] >= 1
                and isinstance(p[1], (int, float)) for p in value)):
            raise ConfigError(f"{where}: must be a list of [n, limit] pairs")


def language_settings(overrides: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Every language's complete settings: the table, with ``overrides`` on top, over ``[default]``."""
    table = _read(TABLE)
    if overrides:
        for language, settings in _read(Path(overrides)).items():
            table.setdefault(language, {}).update(settings)
    default = table[DEFAULT]
    return {language: {**default, **settings} for language, settings in table.items()}


def for_language(settings: dict[str, dict[str, Any]], language: str) -> dict[str, Any]:
    return settings.get(language) or settings[DEFAULT]

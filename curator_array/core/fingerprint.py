"""The pipeline part of the run contract: a fingerprint, its digest, and what changed.

A logical run promises that every shard went through the same pipeline. ``run.json`` pins
the pipeline's fingerprint (its stages with their parameters, the input and output
formats, the text field); every later start compares its own and refuses a difference,
naming each changed value. A value that is unset (null) is the same as a value not pinned:
a setting added to a stage later, unset by default, keeps earlier runs the same run. Pure
functions over JSON-plain dicts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

TOP_LEVEL = ("input", "output", "text_field")


def fingerprint_digest(fingerprint: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(_set_values(fingerprint), sort_keys=True).encode()).hexdigest()


def _set_values(value: Any) -> Any:
    """``value`` without the keys whose value is unset (null), at every depth."""
    if isinstance(value, dict):
        return {key: _set_values(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_set_values(item) for item in value]
    return value


def file_digest(path: str | os.PathLike) -> str:
    """The sha256 of a file a pipeline depends on (a tokenizer, a model): it pins the file in
    the fingerprint, so another file is another pipeline. Read in chunks: a model may be large."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


SHA256 = re.compile(r"[0-9a-f]{64}")  # a file's digest: its first 12 digits tell two apart


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f"sha256 {value[:12]}" if SHA256.fullmatch(value) else value
    return json.dumps(value, sort_keys=True)


def _param_changes(old: dict[str, Any], new: dict[str, Any], where: str) -> list[str]:
    changes = []
    if old.get("class") != new.get("class"):
        changes.append(f"{where}: {old.get('class')} → {new.get('class')}")
    return changes + [f"{line} ({where})" for line in _value_changes(old.get("params", {}), new.get("params", {}))]


def _value_changes(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``key: old → new`` per differing key; nested tables by dotted key (``languages.ja.min_words``)."""
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):
            changes += _value_changes(before, after, f"{prefix}{key}.")
        else:
            changes.append(f"{prefix}{key}: {_show(before)} → {_show(after)}")
    return changes


def _stage_settings(stage: dict[str, Any], where: str, added: bool) -> list[str]:
    """A stage that came or went, by the settings (its options) that brought it: ``min_words:
    unset → 5 (stage word_count, added)``; one line naming the stage when it has none."""
    settings = {key: value for key, value in (stage.get("params") or {}).items() if value not in (None, False, [], {})}
    if not settings:
        return [f"{where}"]
    empty = {key: None for key in settings}
    return [f"{line} ({where})" for line in (_value_changes(empty, settings) if added else _value_changes(settings, empty))]


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per difference, e.g. ``min_words: 5 → 3 (stage word_count)``; empty if equal."""
    changes = [
        f"{key}: {_show(old.get(key))} → {_show(new.get(key))}" for key in TOP_LEVEL if old.get(key) != new.get(key)
    ]
    old_source, new_source = old.get("source") or {}, new.get("source") or {}
    changes += _param_changes(old_source, new_source, f"source {new_source.get('name', '?')}")
    for key in sorted((set(old) | set(new)) - {*TOP_LEVEL, "source", "stages"}):  # the later phases' settings
        changes += [f"{line} ({key})" for line in _value_changes({key: old.get(key)}, {key: new.get(key)})]
    old_stages = {s["name"]: s for s in old.get("stages", [])}
    new_stages = {s["name"]: s for s in new.get("stages", [])}
    if list(old_stages) != list(new_stages):
        changes.append(f"stages: {', '.join(old_stages) or 'none'} → {', '.join(new_stages) or 'none'}")
    for name in new_stages:
        if name in old_stages:
            changes += _param_changes(old_stages[name], new_stages[name], f"stage {name}")
        else:
            changes += _stage_settings(new_stages[name], f"stage {name}, added", added=True)
    for name in old_stages:
        if name not in new_stages:
            changes += _stage_settings(old_stages[name], f"stage {name}, removed", added=False)
    if not changes and fingerprint_digest(old) != fingerprint_digest(new):
        changes.append("the pipeline definition differs")
    return changes

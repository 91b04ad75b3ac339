"""The pipeline part of the run contract: a fingerprint, its digest, and what changed.

A logical run promises that every shard went through the same pipeline. ``run.json`` pins
the pipeline's fingerprint (its stages with their parameters, the input and output
formats, the text field); every later start compares its own and refuses a difference,
naming each changed value. Pure functions over JSON-plain dicts.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

TOP_LEVEL = ("input", "output", "text_field")


def fingerprint_digest(fingerprint: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _param_changes(old: dict[str, Any], new: dict[str, Any], where: str) -> list[str]:
    changes = []
    if old.get("class") != new.get("class"):
        changes.append(f"{where}: {old.get('class')} → {new.get('class')}")
    old_params, new_params = old.get("params", {}), new.get("params", {})
    for key in sorted(set(old_params) | set(new_params)):
        if old_params.get(key) != new_params.get(key):
            changes.append(f"{key}: {_show(old_params.get(key))} → {_show(new_params.get(key))} ({where})")
    return changes


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per difference, e.g. ``min_words: 5 → 3 (stage word_count)``; empty if equal."""
    changes = [
        f"{key}: {_show(old.get(key))} → {_show(new.get(key))}" for key in TOP_LEVEL if old.get(key) != new.get(key)
    ]
    old_source, new_source = old.get("source") or {}, new.get("source") or {}
    changes += _param_changes(old_source, new_source, f"source {new_source.get('name', '?')}")
    old_stages = {s["name"]: s for s in old.get("stages", [])}
    new_stages = {s["name"]: s for s in new.get("stages", [])}
    if list(old_stages) != list(new_stages):
        changes.append(f"stages: {', '.join(old_stages) or 'none'} → {', '.join(new_stages) or 'none'}")
    for name in new_stages:
        if name in old_stages:
            changes += _param_changes(old_stages[name], new_stages[name], f"stage {name}")
    if not changes and fingerprint_digest(old) != fingerprint_digest(new):
        changes.append("the pipeline definition differs")
    return changes

"""The pipeline part of the run contract: a fingerprint, its digest, and what changed.

A logical run promises that every shard went through the same pipeline. ``run.json`` pins
the pipeline's fingerprint (its stages with their parameters, the input and output
formats, the text field); every later start compares its own and refuses a difference,
naming each changed value. A value that is unset (null) is the same as a value not pinned:
a setting added to a stage later, unset by default, keeps earlier runs the same run. The
fingerprint is a typed value (``PipelineFingerprint``); the comparisons are pure functions
over its JSON.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

TOP_LEVEL = ("input", "output", "text_field")
SELECTED_FROM = "selected_from"
OWN_KEYS = ("source", "stages", *TOP_LEVEL, SELECTED_FROM)  # the rest of a pinned fingerprint: the phases' settings


@dataclass(frozen=True, eq=False)
class PipelineFingerprint(Mapping):
    """What a run pins of its pipeline: its source and stages with their parameters, the
    formats it reads and writes, the text field, the later phases' settings by key, and the
    run it selects from. Written to ``run.json`` as one JSON object (``to_json``: the
    phases' settings beside the other keys, as every release has written it) and read back
    by ``from_json``; read-only by key too, as a mapping of that object."""

    source: Mapping[str, Any] | None = None
    stages: tuple[Mapping[str, Any], ...] = ()
    input: str | None = None
    output: str | None = None
    text_field: str | None = None
    phases: Mapping[str, Any] = field(default_factory=dict)  # each later phase's settings, by its settings key
    selected_from: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return copy.deepcopy({
            "source": self.source, "stages": [dict(stage) for stage in self.stages], "input": self.input,
            "output": self.output, "text_field": self.text_field, **self.phases,
            **({SELECTED_FROM: dict(self.selected_from)} if self.selected_from else {})})

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> PipelineFingerprint:
        if isinstance(payload, PipelineFingerprint):
            return payload
        return cls(payload.get("source"), tuple(payload.get("stages") or ()), payload.get("input"),
                   payload.get("output"), payload.get("text_field"),
                   {key: value for key, value in payload.items() if key not in OWN_KEYS}, payload.get(SELECTED_FROM))

    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())

    @property
    def reader_policy(self) -> str | None:
        """The reader's malformed-record policy (the one setting ``--repair`` may change)."""
        return next((stage["params"]["malformed"] for stage in self.stages
                     if "malformed" in stage.get("params", {})), None)

    def with_reader_policy(self, policy: str) -> PipelineFingerprint:
        stages = copy.deepcopy([dict(stage) for stage in self.stages])
        for stage in stages:
            if "malformed" in stage.get("params", {}):
                stage["params"]["malformed"] = policy
        return replace(self, stages=tuple(stages))

    def only_the_policy_differs(self, wanted: PipelineFingerprint) -> bool:
        """Whether ``wanted`` is this pipeline but for the reader's malformed-record policy
        (what ``--repair`` may change)."""
        policy = wanted.reader_policy
        return policy is not None and policy != self.reader_policy and self.with_reader_policy(policy).same_as(wanted)

    def with_phases(self, phases: Mapping[str, Any], settings_keys: set[str]) -> PipelineFingerprint:
        """This fingerprint with the settings of the phases ``settings_keys`` names replaced by ``phases``'."""
        kept = {key: value for key, value in self.phases.items() if key not in settings_keys}
        return replace(self, phases={**kept, **phases})

    def changes_to(self, other: Mapping[str, Any]) -> list[str]:
        """What differs in ``other``, one line each (``describe_changes``)."""
        return describe_changes(self, other)

    def same_as(self, other: Mapping[str, Any]) -> bool:
        return json.dumps(self.to_json(), sort_keys=True) == json.dumps(_plain(other), sort_keys=True)


def _plain(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    return fingerprint.to_json() if isinstance(fingerprint, PipelineFingerprint) else dict(fingerprint)


def fingerprint_digest(fingerprint: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(_set_values(_plain(fingerprint)), sort_keys=True).encode()).hexdigest()


def _set_values(value: Any) -> Any:
    """``value`` without the keys whose value is unset (null), at every depth."""
    if isinstance(value, dict):
        return {key: _set_values(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_set_values(item) for item in value]
    return value


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


def describe_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per difference, e.g. ``min_words: 5 → 3 (stage word_count)``; empty if equal."""
    old, new = _plain(old), _plain(new)
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

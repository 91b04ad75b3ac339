"""What every record shares: its schema version, reading a record file, and a codec driven
by the record's dataclass fields.

A record is a frozen dataclass; ``read_fields`` reads each of its fields from a JSON object
by the field's declared type, and ``plain_fields`` writes them back. A value of the wrong
type is left out and the field keeps its default: the measured fields of a record (counts,
times, hosts) inform, so a bad one must not make a finished shard unreadable. A field a
reader depends on is read strictly by the record itself (``require_int``).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ... import __version__
from ..errors import CorruptCheckpointError

SCHEMA_VERSION = 2
WRITTEN_BY = f"curator-array {__version__}"


class RecordError(ValueError):
    """A record's JSON is not what it claims to be; the message says which field and why."""


def load_json(path: Path) -> Any:
    """A JSON file, or CorruptCheckpointError naming it."""
    try:
        return json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise CorruptCheckpointError(f"{path}: not valid JSON ({exc})") from None


def read_record(from_json: Callable[[Any], Any], path: Path) -> Any:
    """The record in ``path`` as ``from_json`` builds it; CorruptCheckpointError naming the file."""
    try:
        return from_json(load_json(path))
    except RecordError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from None


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def require_int(payload: Mapping[str, Any], key: str) -> int:
    value = payload.get(key)
    if not is_int(value):
        raise RecordError(f"field {key!r} must be an integer, got {value!r}")
    return value


def json_object(payload: Any) -> Mapping[str, Any]:
    if not isinstance(payload, Mapping):
        raise RecordError(f"expected a JSON object, got {type(payload).__name__}")
    return payload


def unknown_fields(payload: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    """What a newer writer added: kept, and written back."""
    return {k: v for k, v in payload.items() if k not in known}


_MISSING = object()


def _read(kind: Any, value: Any) -> Any:
    """``value`` as ``kind`` reads it, or ``_MISSING`` when it is not one."""
    origin, arguments = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in arguments:
            return None
        for option in arguments:
            if option is not type(None) and (found := _read(option, value)) is not _MISSING:
                return found
        return _MISSING
    if kind is Any:
        return value
    if kind is int:
        return value if is_int(value) else _MISSING
    if kind is float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else _MISSING
    if kind in (str, bool):
        return value if isinstance(value, kind) else _MISSING
    if origin is tuple:
        if not isinstance(value, list):
            return _MISSING
        items = (_read(arguments[0], item) for item in value)
        return tuple(item for item in items if item is not _MISSING)
    if origin is dict:
        if not isinstance(value, dict):
            return _MISSING
        items = ((key, _read(arguments[1], item)) for key, item in value.items())
        return {key: item for key, item in items if item is not _MISSING}
    if dataclasses.is_dataclass(kind):
        return kind.from_json(value) if isinstance(value, Mapping) else _MISSING
    raise TypeError(f"a record field of type {kind!r} has no reader")


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def read_fields(cls: type, payload: Mapping[str, Any], only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The fields of record type ``cls`` that ``payload`` holds with a value of their type
    (``only``: just these); the others are left out, to take their defaults."""
    hints = _hints(cls)
    values = {}
    for item in dataclasses.fields(cls):
        if (only is not None and item.name not in only) or item.name not in payload:
            continue
        value = _read(hints[item.name], payload[item.name])
        if value is not _MISSING:
            values[item.name] = value
    return values


def plain(value: Any) -> Any:
    """A field's value as JSON holds it: tuples as lists, nested records as their JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def plain_fields(record: Any, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Every field of ``record`` (``only``: just these), in their order, as JSON holds them."""
    return {item.name: plain(getattr(record, item.name)) for item in dataclasses.fields(record)
            if only is None or item.name in only}


class FieldRecord:
    """A record whose JSON is exactly its fields (``read_fields`` / ``plain_fields``)."""

    @classmethod
    def from_json(cls, payload: Any):
        return cls(**read_fields(cls, payload if isinstance(payload, Mapping) else {}))

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)

"""The records of a logical run beside ``run.json``: how it names its frozen listing, and
the run options a start or a submission was given (``PinnedRequest``), each with where its
value came from (``OptionValue``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..atomic import create_json_exclusive
from ..errors import CorruptCheckpointError
from ..layout import CheckpointLayout, utc_now
from .base import SCHEMA_VERSION, FieldRecord, RecordError, json_object, read_fields, read_record


@dataclass(frozen=True)
class ListingRef(FieldRecord):
    """How run.json names the run's frozen listing: its file, digest and size."""

    file: str
    digest: str
    files: int = 0
    bytes: int = 0

    @classmethod
    def from_json(cls, payload: Any) -> ListingRef:
        if not (isinstance(payload, Mapping) and isinstance(payload.get("file"), str)
                and isinstance(payload.get("digest"), str)):
            raise RecordError(f"a listing reference needs 'file' and 'digest' strings, got {payload!r}")
        return super().from_json(payload)


def shown(value: Any) -> str:
    """A value as status and the report show it: lists joined by commas, booleans as
    ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


@dataclass(frozen=True)
class OptionValue:
    """A run option's value and where it came from (a flag, a site's ``[env]``, the
    environment, the default, a pinned request)."""

    value: Any
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"value": list(self.value) if isinstance(self.value, tuple) else self.value, "source": self.source}

    @classmethod
    def from_json(cls, payload: Any) -> OptionValue:
        if not isinstance(payload, Mapping) or "value" not in payload or not isinstance(payload.get("source"), str):
            raise RecordError(f"an option value needs a value and a source, got {payload!r}")
        value = payload["value"]
        return cls(tuple(value) if isinstance(value, list) else value, payload["source"])

    @property
    def shown(self) -> str:
        return shown(self.value)


@dataclass(frozen=True)
class PinnedRequest:
    """``request-<id>.json``: the run options a start was given, with where each came from.

    ``submit`` writes one before it queues anything, and its elements run exactly it
    (``run --request ID``), whatever reaches them through a container runtime; the first
    start of a run pins its own in ``run.json``. The id is a digest of the values, so
    the same request is one file.
    """

    options: dict[str, OptionValue]
    written_at: str | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def id(self) -> str:
        payload = {name: value.to_json() for name, value in self.options.items()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_json(cls, payload: Any) -> PinnedRequest:
        payload = json_object(payload)
        options = payload.get("settings")
        if not isinstance(options, dict):
            raise RecordError("'settings' must map each option to its value and source")
        return cls({name: OptionValue.from_json(value) for name, value in options.items()},
                   **{"schema_version": 1, **read_fields(cls, payload, ("written_at", "schema_version"))})

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "settings": {name: value.to_json() for name, value in self.options.items()},
                "written_at": self.written_at, "schema_version": self.schema_version}

    @classmethod
    def read(cls, layout: CheckpointLayout, request_id: str) -> PinnedRequest:
        path = layout.request_path(request_id)
        if not path.is_file():
            raise CorruptCheckpointError(f"{path}: no such request in the checkpoint (was it archived by --new-run?)")
        request = read_record(cls.from_json, path)
        if request.id != request_id:
            raise CorruptCheckpointError(f"{path}: its values do not match its id {request_id}")
        return request

    def write(self, layout: CheckpointLayout) -> str:
        """Write once (a request with the same values is the same file); returns the id."""
        create_json_exclusive(layout.request_path(self.id), {**self.to_json(), "written_at": utc_now()})
        return self.id

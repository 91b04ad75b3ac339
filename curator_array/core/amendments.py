"""Repairs a user asked for (``--repair``), recorded: what changed in a run, for which tasks, when.

A run freezes its listing and pins its pipeline, so that a retry cannot quietly compute
something else. But a task that failed on a bad input file has produced nothing, and the
documented fix (mend the file, or let the reader skip malformed records) must not cost the
tasks that finished. An amendment records such a fix: the new size and mtime of input files
whose tasks had not finished, or the reader's new malformed-record policy. The frozen
listing and the pinned pipeline stay as they were; what a start checks its files and its
pipeline against is them with the amendments applied, in the order they were made.

Each amendment is one file under ``amendments/`` next to run.json, written atomically, so
that elements of an array amending their own shards never write the same file.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from typing import Any

from .atomic import write_json_atomic
from .layout import CheckpointLayout, utc_now
from .records.base import RecordError, load_json

INPUT, MALFORMED, RELIST = "input", "malformed", "relist"


@dataclass(frozen=True)
class Amendment:
    kind: str  # INPUT: input files of unfinished tasks changed; MALFORMED: the reader's policy changed;
    # RELIST: files added to the input tree joined the run (--relist)
    at: str = ""
    shard_index: int | None = None  # the shard whose element amended its files (INPUT)
    tasks: tuple[str, ...] = ()
    files: dict[str, tuple[int, int]] = field(default_factory=dict)  # path → (size, mtime_ns) now
    malformed: str | None = None  # the policy from now on (MALFORMED)
    before: str | None = None  # the policy until now (MALFORMED)
    added_files: int = 0  # RELIST: files that joined the run
    rerun_shards: str = ""  # RELIST: complete shards that run again for them (an array expression)

    def to_json(self) -> dict[str, Any]:
        written = {"kind": self.kind, "at": self.at, "shard_index": self.shard_index, "tasks": list(self.tasks),
                   "files": {path: list(stat) for path, stat in self.files.items()}, "malformed": self.malformed,
                   "before": self.before}
        if self.kind == RELIST:
            written.update(added_files=self.added_files, rerun_shards=self.rerun_shards)
        return written

    @classmethod
    def from_json(cls, payload: Any) -> Amendment:
        if not isinstance(payload, dict) or payload.get("kind") not in (INPUT, MALFORMED, RELIST):
            raise RecordError("not an amendment")
        files = payload.get("files") or {}
        return cls(payload["kind"], str(payload.get("at") or ""), payload.get("shard_index"),
                   tuple(payload.get("tasks") or ()), {str(p): (int(s[0]), int(s[1])) for p, s in files.items()},
                   payload.get("malformed"), payload.get("before"), int(payload.get("added_files") or 0),
                   str(payload.get("rerun_shards") or ""))

    def describe(self) -> str:
        if self.kind == RELIST:
            return (f"{self.at}: --relist added {self.added_files} input file(s) to the run; complete shard(s) that "
                    f"ran again for them: {self.rerun_shards or 'none'}")
        if self.kind == MALFORMED:
            return f"{self.at}: malformed records {self.before} → {self.malformed} for the unfinished tasks"
        names = ", ".join(sorted(os.path.basename(path) for path in self.files)[:3])
        where = f" of shard {self.shard_index}" if self.shard_index is not None else ""
        return f"{self.at}: input of {len(self.tasks)} unfinished task(s){where} changed ({names})"


def amendments_dir(layout: CheckpointLayout):
    return layout.completion_dir / "amendments"


def write_amendment(layout: CheckpointLayout, amendment: Amendment) -> Amendment:
    stamped = Amendment(**{**amendment.__dict__, "at": utc_now()})
    directory = amendments_dir(layout)
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{stamped.at.replace(':', '')}-{secrets.token_hex(4)}.json"
    write_json_atomic(directory / name, stamped.to_json())
    return stamped


def read_amendments(layout: CheckpointLayout) -> list[Amendment]:
    """Every amendment of the run, oldest first."""
    directory = amendments_dir(layout)
    if not directory.is_dir():
        return []
    return [Amendment.from_json(load_json(directory / name)) for name in sorted(os.listdir(directory))
            if name.endswith(".json")]

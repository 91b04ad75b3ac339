"""Finished tasks of an incomplete shard, recorded where they finish, so a rerun skips them.

Each attempt of a shard has a record file (``layout.task_record_path``) whose one line, the
header, names the run, the shard and the attempt; the driver writes it before any task
starts. Next to it, a ``.parts`` directory holds one append-only file per worker process:
the worker that renamed an output part into place appends that part's line (its files,
each with size and CRC-32, and what it counted) and syncs it before it hands the part on.
A task is finished when its final part and every part before it are on record; a line
cut short by a crash is ignored.

So a killed driver costs at most the parts in flight: an output renamed into place whose
line was not yet written is redone under the same name, replacing itself, never doubled;
a line never names an output that was not synced and renamed first.

A rerun of the shard trusts a record only when it belongs to this run and shard, and its
outputs are still there, with the recorded size and checksum; any other recorded task
runs again, and the log says why.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import KeptOpen, fsync_directory, write_bytes_atomic
from .layout import AttemptId, CheckpointLayout
from .records.base import SCHEMA_VERSION
from .records.contamination import Contamination
from .records.shard import AttemptShare
from .sharding import ShardConfig
from .tallies import Tallies

logger = logging.getLogger(__name__)

CHUNK = 1 << 20


def file_check(path: str | os.PathLike) -> tuple[int, int]:
    """(size, CRC-32) of a file: what a task record promises about each output."""
    crc, size = 0, 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


@dataclass(frozen=True)
class TaskRecord:
    """One finished task: its outputs (relative to the output dir) and what it counted."""

    task_id: str
    files: tuple[tuple[str, int, int], ...]  # (path, size, crc32)
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    attempt: str = ""
    tokens: int = 0
    contamination: Contamination = field(default_factory=Contamination)
    tallies: Tallies = field(default_factory=Tallies)

    def to_line(self) -> str:
        """Compact JSON. An output named after its task (as writers name them) is stored as
        ``[rest of the name, size, crc]``, any other as ``[name, size, crc, 0]``."""
        files = [[name[len(self.task_id):], size, crc] if name.startswith(self.task_id) else [name, size, crc, 0]
                 for name, size, crc in self.files]
        payload: dict[str, Any] = {"t": self.task_id, "f": files, "n": [self.rows_in, self.rows_out, self.bytes_in]}
        if self.dropped:
            payload["d"] = self.dropped
        if self.skipped:
            payload["s"] = self.skipped
        if self.tokens:
            payload["k"] = self.tokens
        if self.contamination:
            payload["c"] = self.contamination.to_json()
        payload.update(self.tallies.to_record())
        return json.dumps(payload, separators=(",", ":"))

    @classmethod
    def from_line(cls, line: str, attempt: str) -> TaskRecord:
        return cls.from_payload(json.loads(line), attempt)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], attempt: str) -> TaskRecord:
        task_id = str(payload["t"])
        rows_in, rows_out, bytes_in = payload["n"]
        files = tuple((str(entry[0]) if len(entry) == 4 else task_id + str(entry[0]), int(entry[1]), int(entry[2]))
                      for entry in payload["f"])
        return cls(task_id, files, int(rows_in), int(rows_out), int(bytes_in), dict(payload.get("d", {})),
                   dict(payload.get("s", {})), attempt, int(payload.get("k", 0)),
                   Contamination.from_json(payload.get("c")), Tallies.from_record(payload))


@dataclass(frozen=True)
class RecordHeader:
    """The first line of a record file: whose records these are."""

    run_id: str | None
    shard_index: int
    total_shards: int
    minimum_shard_index: int
    attempt: str
    shard_tasks: int

    def to_line(self) -> str:
        return json.dumps({"run_id": self.run_id, "shard_index": self.shard_index, "total_shards": self.total_shards,
                           "minimum_shard_index": self.minimum_shard_index, "attempt": self.attempt,
                           "shard_tasks": self.shard_tasks, "schema_version": SCHEMA_VERSION}, sort_keys=True)

    @classmethod
    def from_line(cls, line: str) -> RecordHeader:
        payload = json.loads(line)
        return cls(payload.get("run_id"), int(payload["shard_index"]), int(payload["total_shards"]),
                   int(payload["minimum_shard_index"]), str(payload["attempt"]), int(payload.get("shard_tasks", 0)))

    def belongs_to(self, run_id: str | None, shard: ShardConfig) -> str | None:
        """Why these records are not this run's shard's, or None."""
        if (self.shard_index, self.total_shards, self.minimum_shard_index) != (
                shard.shard_index, shard.total_shards, shard.minimum_shard_index):
            return (f"written for shard {self.shard_index} of {self.total_shards} (minimum {self.minimum_shard_index}), "
                    f"not {shard.describe()}")
        if run_id and self.run_id != run_id:
            return f"written for run {self.run_id}, not run {run_id}"
        return None


def parts_dir(record_path: Path) -> Path:
    """Where the workers of the attempt whose record file is ``record_path`` record parts."""
    return record_path.with_suffix(".parts")


def start_task_records(layout: CheckpointLayout, attempt: AttemptId, header: RecordHeader) -> Path:
    """Write the attempt's header (synced) and return the directory its workers record parts in."""
    path = layout.task_record_path(attempt, header.shard_index)
    parts = parts_dir(path)
    parts.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, (header.to_line() + "\n").encode())
    return parts


@dataclass(frozen=True)
class PartRecord:
    """Output parts ``part`` to ``part + parts - 1`` of a task (the parts one file holds); a
    task written whole is its part 0, and final."""

    part: int
    final: bool
    record: TaskRecord
    parts: int = 1

    def to_line(self) -> str:
        count = f',"q":{self.parts}' if self.parts != 1 else ""
        return f'{self.record.to_line()[:-1]},"p":{self.part},"z":{int(self.final)}{count}}}'

    @classmethod
    def from_line(cls, line: str, attempt: str) -> PartRecord:
        payload = json.loads(line)
        return cls(int(payload["p"]), bool(payload["z"]), TaskRecord.from_payload(payload, attempt),
                   int(payload.get("q", 1)))


def _summed(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for count in counts:
        for key, value in count.items():
            total[key] = total.get(key, 0) + value
    return total


def finished_task(parts: Mapping[int, PartRecord]) -> TaskRecord | None:
    """The task's record when a chain of records by first part covers part 0 to the final
    part, else None (a record off the chain, from an attempt that cut the parts otherwise,
    counts for nothing)."""
    records, number = [], 0
    while number in parts:
        part = parts[number]
        records.append(part.record)
        if part.final:
            break
        number = part.part + part.parts
    else:
        return None
    first = records[0]
    return TaskRecord(first.task_id, tuple(sorted(f for r in records for f in r.files)),
                      sum(r.rows_in for r in records), sum(r.rows_out for r in records),
                      sum(r.bytes_in for r in records), _summed(r.dropped for r in records),
                      _summed(r.skipped for r in records), first.attempt, sum(r.tokens for r in records),
                      sum((r.contamination for r in records), Contamination()),
                      sum((r.tallies for r in records), Tallies()))


class PartRecordLog:
    """This worker process's file of part records in one attempt's ``.parts`` directory.

    One file per process, named with a token of its own, so no two writers ever share a
    file (shared filesystems do not promise atomic appends across nodes) and a recycled
    pid never continues another process's cut line.
    """

    _TOKEN = secrets.token_hex(4)
    _open = KeptOpen(os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # its pid and token make each name its own

    def __init__(self, directory: Path):
        self.path = Path(directory) / f"{socket.gethostname()}-{os.getpid()}-{self._TOKEN}.jsonl"

    def append(self, part: PartRecord) -> None:
        """Append and sync the line: once this returns, a rerun may skip the part. The file
        stays open for the process's next lines, so a line costs one sync and no open."""
        fd, opened = self._open.fd(self.path)
        if opened:
            fsync_directory(self.path.parent)
        data = (part.to_line() + "\n").encode()
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)


def read_parts(directory: Path, attempt: str) -> dict[str, TaskRecord]:
    """The finished tasks the part files in ``directory`` record."""
    finished, _ = read_part_files(directory, attempt)
    return finished


def read_part_files(directory: Path, attempt: str) -> tuple[dict[str, TaskRecord], dict[str, set[str]]]:
    """The finished tasks the part files in ``directory`` record, and the files that the
    parts of unfinished tasks name (under the output dir), by task."""
    parts: dict[str, dict[int, PartRecord]] = {}
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else ():
        for line in path.read_text().splitlines():
            try:
                part = PartRecord.from_line(line, attempt)
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a crash: that part is written again
            parts.setdefault(part.record.task_id, {})[part.part] = part
    finished = {task_id: finished_task(found) for task_id, found in parts.items()}
    unfinished = {task_id: {check[0] for part in parts[task_id].values() for check in part.record.files}
                  for task_id, record in finished.items() if record is None}
    return {task_id: record for task_id, record in finished.items() if record is not None}, unfinished


@dataclass
class ShardRecords:
    """What the record files of one shard say: the finished tasks (the latest record of each)."""

    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    attempts: list[str] = field(default_factory=list)
    shard_tasks: int = 0
    ignored: list[str] = field(default_factory=list)  # why a file was left out
    # Files that parts of tasks no attempt finished put in place: a rerun of the task may cut
    # its parts into files otherwise, so these go first.
    unfinished_files: dict[str, set[str]] = field(default_factory=dict)


def read_shard_records(layout: CheckpointLayout, shard: ShardConfig, run_id: str | None) -> ShardRecords:
    """Every record of the shard's earlier attempts, in attempt order; foreign files are ignored."""
    found = ShardRecords()
    directory = layout.task_records_dir(shard.shard_index)
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns):
        try:
            lines = path.read_text().splitlines()
            header = RecordHeader.from_line(lines[0])
        except (OSError, ValueError, KeyError, IndexError) as exc:
            found.ignored.append(f"{path.name}: unreadable header ({exc})")
            continue
        problem = header.belongs_to(run_id, shard)
        if problem:
            found.ignored.append(f"{path.name}: {problem}")
            continue
        found.attempts.append(header.attempt)
        found.shard_tasks = header.shard_tasks or found.shard_tasks
        finished, unfinished = read_part_files(parts_dir(path), header.attempt)
        found.tasks.update(finished)
        for task_id, files in unfinished.items():
            found.unfinished_files.setdefault(task_id, set()).update(files)
    for task_id in found.tasks:
        found.unfinished_files.pop(task_id, None)
    return found


def verify(records: Iterable[TaskRecord],
           problem_of: Callable[[str, int, int], str | None]) -> tuple[dict[str, TaskRecord], dict[str, str]]:
    """The records whose outputs are all intact, and why each other one is not trusted;
    ``problem_of(name, size, crc)`` says what is wrong with one output (``storage.places``)."""

    def problem_of_record(record: TaskRecord) -> str | None:
        return next(filter(None, (problem_of(name, size, crc) for name, size, crc in record.files)), None)

    records = list(records)
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) * 2)) as pool:
        problems = list(pool.map(problem_of_record, records))
    trusted = {r.task_id: r for r, p in zip(records, problems) if p is None}
    untrusted = {r.task_id: p for r, p in zip(records, problems) if p is not None}
    return trusted, untrusted


def count_done(layout: CheckpointLayout, shard_index: int) -> tuple[int, int, int]:
    """(tasks recorded, tasks in the shard, attempts) of an incomplete shard, for status; cheap:
    no header is checked against the run and no output is opened."""
    directory = layout.task_records_dir(shard_index)
    if not directory.is_dir():
        return 0, 0, 0
    done: set[str] = set()
    shard_tasks = attempts = 0
    for path in directory.glob("*.jsonl"):
        try:
            header = RecordHeader.from_line(path.read_text().splitlines()[0])
        except (OSError, ValueError, KeyError, IndexError):
            continue
        shard_tasks = max(shard_tasks, header.shard_tasks)
        attempts += 1
        done.update(read_parts(parts_dir(path), header.attempt))
    return len(done), shard_tasks, attempts


def attempt_shares(records: Mapping[str, TaskRecord]) -> dict[str, AttemptShare]:
    """Tasks and rows per attempt, for the manifest's account of who did what."""
    shares: dict[str, AttemptShare] = {}
    for record in records.values():
        share = shares.get(record.attempt) or AttemptShare(record.attempt)
        shares[record.attempt] = AttemptShare(record.attempt, share.tasks + 1, share.rows_in + record.rows_in,
                                              share.rows_out + record.rows_out)
    return shares

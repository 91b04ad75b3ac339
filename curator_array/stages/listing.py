"""A run's frozen listing: every input file with its size and modification time, and the
source task and shard hash of each, walked once and kept in the checkpoint.

Every array element needs the full listing to know which tasks are its own. Walking the
input tree in each of 10,000 elements would put 10,000 × (files) metadata operations on a
shared filesystem; reading one Parquet file puts a few. The listing is written by the
first of ``submit``, ``plan --freeze`` or the first element, named by its digest
(``listing-<digest>.parquet`` next to ``run.json``), and pinned in ``run.json``.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.atomic import create_bytes_exclusive
from ..core.errors import CheckpointMismatchError, CorruptCheckpointError
from ..core.layout import CheckpointLayout
from ..core.records.run import ListingRef
from ..core.run_contract import unwritable
from ..core.sharding import ShardConfig, validate_source_ids

SCHEMA = pa.schema([("path", pa.string()), ("size", pa.int64()), ("mtime_ns", pa.int64()),
                    ("task_id", pa.string()), ("task_key", pa.uint64())])
_FIRST_64_BITS = struct.Struct(">Q").unpack_from


def task_keys(task_ids: list[str]) -> np.ndarray:
    """The first 64 bits of sha256(task id), the number the shard formula reduces."""
    sha256 = hashlib.sha256
    return np.fromiter((_FIRST_64_BITS(sha256(t.encode()).digest())[0] for t in task_ids), dtype=np.uint64,
                       count=len(task_ids))


@dataclass(frozen=True)
class Listing:
    """One row per input file (sorted by path); consecutive rows of a task share its id."""

    table: pa.Table

    @classmethod
    def from_rows(cls, paths: list[str], sizes: list[int], mtimes: list[int], task_ids: list[str]) -> Listing:
        table = pa.table({"path": paths, "size": pa.array(sizes, pa.int64()), "mtime_ns": pa.array(mtimes, pa.int64()),
                          "task_id": task_ids, "task_key": task_keys(task_ids)}, schema=SCHEMA)
        return cls(table)

    @cached_property
    def digest(self) -> str:
        """sha256 over the path, size and mtime columns (their Arrow buffers: fast, exact);
        computed once, as the name, the pin and every comparison need it."""
        hasher = hashlib.sha256()
        for name in ("path", "size", "mtime_ns"):
            column = self.table.column(name).combine_chunks()
            for buffer in column.buffers():
                if buffer is not None:
                    hasher.update(buffer)
        return hasher.hexdigest()

    @cached_property
    def task_ids(self) -> tuple[str, ...]:
        """Every task id once, in listing order (found once: freezing, pinning and growing a
        run all ask)."""
        ids = self.table.column("task_id")
        if len(ids) == 0:
            return ()
        values = ids.to_numpy(zero_copy_only=False)
        first = np.concatenate([[True], values[1:] != values[:-1]])
        return tuple(values[first].tolist())

    def rows_of(self, shard: ShardConfig) -> pa.Table:
        """This shard's files, by the spec's formula on the stored hashes (no hashing here)."""
        keys = self.table.column("task_key").to_numpy()
        owned = keys % np.uint64(shard.total_shards) == np.uint64(shard.shard_index - shard.minimum_shard_index)
        return self.table.filter(pa.array(owned)) if shard.in_range else self.table.slice(0, 0)

    def reference(self, name: str) -> ListingRef:
        return ListingRef(name, self.digest, self.table.num_rows, int(pc.sum(self.table.column("size")).as_py() or 0))

    def compare(self, other: Listing, amended: dict[str, tuple[int, int]] | None = None) -> TreeChanges:
        """The files added to, removed from and changed in ``other`` (walked now) against
        ``self`` (frozen), a repaired file (``amended``, by relative path) as it was amended."""
        old = dict(zip(self.table.column("path").to_pylist(),
                       zip(self.table.column("size").to_pylist(), self.table.column("mtime_ns").to_pylist())))
        old.update({path: stat for path, stat in (amended or {}).items() if path in old})
        new = dict(zip(other.table.column("path").to_pylist(),
                       zip(other.table.column("size").to_pylist(), other.table.column("mtime_ns").to_pylist())))
        return TreeChanges(sorted(set(new) - set(old)), sorted(set(old) - set(new)),
                           sorted(p for p in set(old) & set(new) if old[p] != new[p]))

    def differences(self, other: Listing, limit: int = 3) -> str:
        """What changed from ``self`` (frozen) to ``other`` (walked now), in one sentence."""
        return self.compare(other).describe(limit, noun="", every=True)


def save(layout: CheckpointLayout, listing: Listing) -> str:
    """Write the listing once, named by its digest; returns the file name."""
    name = f"listing-{listing.digest[:16]}.parquet"
    sink = io.BytesIO()
    pq.write_table(listing.table, sink, compression="zstd")
    try:
        create_bytes_exclusive(layout.listing_path(name), sink.getvalue())
    except OSError as exc:
        raise unwritable(layout, exc) from None
    return name


def load(layout: CheckpointLayout, reference: ListingRef) -> Listing:
    path = layout.listing_path(reference.file)
    try:
        listing = Listing(pq.read_table(path, schema=SCHEMA))
    except (OSError, pa.ArrowException) as exc:
        raise CorruptCheckpointError(f"{path}: the run's frozen listing cannot be read ({exc})") from None
    if listing.digest != reference.digest:
        raise CorruptCheckpointError(f"{path}: does not match the digest run.json pins for it")
    return listing


def freeze(layout: CheckpointLayout, listing: Listing) -> ListingRef:
    """A walked listing made the run's: its task ids checked, saved once; the reference
    run.json pins."""
    validate_source_ids(listing.task_ids)
    return listing.reference(save(layout, listing))


@dataclass(frozen=True)
class TreeChanges:
    """How an input tree differs from a run's frozen listing, by relative path."""

    added: list[str]
    removed: list[str]
    changed: list[str]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def describe(self, limit: int = 3, noun: str = "file(s) ", every: bool = False) -> str:
        """``1 file(s) added (e.g. c.jsonl)``; ``every`` names the empty groups too (``0 removed``)."""
        return ", ".join(f"{len(items)} {noun}{label}" + (f" (e.g. {', '.join(items[:limit])})" if items else "")
                         for label, items in (("added", self.added), ("removed", self.removed),
                                              ("changed", self.changed)) if items or every)


@dataclass(frozen=True)
class ChangedFile:
    """An input file whose size or mtime is not what the run recorded; ``now`` is None when it is gone."""

    path: str
    why: str
    now: tuple[int, int] | None


def changed_files(files: list[tuple[str, int, int]],
                  states: Mapping[str, tuple[int, int] | None] | None = None) -> list[ChangedFile]:
    """Those of this element's own files (path, size, mtime as the run recorded them) that are
    gone or differ now: ``states`` gives each one's (size, mtime) now, None when it is gone;
    without it, a stat of each (cheap: a few per element)."""
    changed = []
    for path, size, mtime_ns in files:
        now = states[path] if states is not None else _stat(path)
        if now is None:
            changed.append(ChangedFile(path, f"{path} is gone", None))
        elif now != (size, mtime_ns):
            why = f"{path} (size {size} → {now[0]})" if now[0] != size else f"{path} (modified since the listing was frozen)"
            changed.append(ChangedFile(path, why, now))
    return changed


def _stat(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_size, status.st_mtime_ns


def changed_error(changed: list[ChangedFile], repairable: bool) -> CheckpointMismatchError:
    """The refusal of changed inputs; ``repairable``: every changed file belongs to a task that
    has not finished, so --repair would accept them."""
    advice = ("--repair accepts them: their tasks have not finished; or restore them" if repairable
              else "restore them")
    return CheckpointMismatchError(
        f"{len(changed)} input file(s) of this shard changed since the run froze its listing "
        f"({'; '.join(c.why for c in changed[:3])}): {advice}, or start a new logical run (--new-run, or a new "
        "checkpoint path); `curator-array run --relist` compares the whole tree"
    )

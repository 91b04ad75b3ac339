"""Deterministic assignment of source tasks to logical shards.

``logical_shard = int(sha256(task_id)[:16 hex], 16) % total_shards + minimum_shard_index``

The formula is the reference system's contract. A run's shards form one ``ShardRange``;
one array element runs one ``ShardConfig`` (an index inside that range). Which index and
range a process runs is decided from its environment by ``job_context``, not here: this
module is pure arithmetic.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .arrays import ArrayWindow, array_windows
from .errors import ConfigError

logger = logging.getLogger(__name__)

RANDOM_ID_PREFIX = "r"
_FIRST_64_BITS = struct.Struct(">Q").unpack_from
# Above this many ids, selection is split over the CPUs (forked, so the ids are not copied).
PARALLEL_SELECT_THRESHOLD = 200_000
_FORKED_IDS: list[str] = []


def shard_of(task_id: str, total_shards: int, minimum_shard_index: int = 0) -> int:
    """The logical shard that owns ``task_id``.

    The first 8 digest bytes read big-endian are the same integer as the first 16 hex
    characters, without building the hex string.
    """
    return _FIRST_64_BITS(hashlib.sha256(task_id.encode()).digest())[0] % total_shards + minimum_shard_index


@dataclass(frozen=True)
class ShardRange:
    """The logical shards of one run: ``minimum .. minimum + total - 1``.

    Every question about "which shards exist" (membership, listing, submission windows)
    is answered here, so the arithmetic is written once.
    """

    total: int
    minimum: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.total, bool) or not isinstance(self.total, int) or self.total <= 0:
            raise ConfigError(f"total_shards must be an integer greater than zero, got {self.total!r}")
        if isinstance(self.minimum, bool) or not isinstance(self.minimum, int) or self.minimum < 0:
            raise ConfigError(f"minimum_shard_index must be a non-negative integer, got {self.minimum!r}")

    @property
    def last(self) -> int:
        return self.minimum + self.total - 1

    def __contains__(self, shard: object) -> bool:
        return isinstance(shard, int) and self.minimum <= shard <= self.last

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices())

    def indices(self) -> range:
        return range(self.minimum, self.minimum + self.total)

    def __str__(self) -> str:
        return f"{self.minimum}..{self.last}"

    def shard_of(self, task_id: str) -> int:
        return shard_of(task_id, self.total, self.minimum)

    def outside(self, shards: Iterable[int]) -> list[int]:
        return [s for s in shards if s not in self]

    def windows(self, shards: Iterable[int], max_array_size: int | None = None) -> list[ArrayWindow]:
        """``sbatch --array`` windows for ``shards`` (all members), indices below ``max_array_size``."""
        wanted = sorted(set(shards))
        stray = self.outside(wanted)
        if stray:
            raise ConfigError(f"shards {stray[:5]} are outside the run's range {self}")
        return array_windows(wanted, max_array_size)

    def to_json(self) -> dict[str, int]:
        return {"minimum_shard_index": self.minimum, "total_shards": self.total}


@dataclass(frozen=True)
class ShardConfig:
    """Which logical shard this process runs, out of which range."""

    shard_index: int
    total_shards: int
    minimum_shard_index: int = 0

    def __post_init__(self) -> None:
        ShardRange(self.total_shards, self.minimum_shard_index)
        if self.shard_index < 0:
            raise ConfigError(f"shard_index must be non-negative, got {self.shard_index}")

    @classmethod
    def single(cls) -> ShardConfig:
        """One implicit shard: an ordinary run that processes every task."""
        return cls(shard_index=0, total_shards=1, minimum_shard_index=0)

    @classmethod
    def of(cls, index: int, shards: ShardRange) -> ShardConfig:
        return cls(index, shards.total, shards.minimum)

    @property
    def range(self) -> ShardRange:
        return ShardRange(self.total_shards, self.minimum_shard_index)

    @property
    def in_range(self) -> bool:
        return self.shard_index in self.range

    def describe(self) -> str:
        return f"logical shard {self.shard_index} of {self.total_shards} (range {self.range})"

    def owns(self, task_id: str) -> bool:
        return shard_of(task_id, self.total_shards, self.minimum_shard_index) == self.shard_index

    def select(self, task_ids: Iterable[str]) -> list[str]:
        """The ids this shard owns, in input order; none (with a warning) when out of range."""
        if not self.in_range:
            logger.warning(
                "shard index %d is outside the assignable range %s: it receives no tasks",
                self.shard_index,
                self.range,
            )
            return []
        ids = task_ids if isinstance(task_ids, list) else list(task_ids)
        wanted = self.shard_index - self.minimum_shard_index
        workers = min(4, os.cpu_count() or 1)
        if len(ids) < PARALLEL_SELECT_THRESHOLD or workers < 2 or not hasattr(os, "fork"):
            return _owned(ids, self.total_shards, wanted)
        return _owned_in_parallel(ids, self.total_shards, wanted, workers)


def _owned(task_ids: list[str], total: int, wanted: int) -> list[str]:
    # shard_of() inlined, with locals: this loop runs over every source task of the run.
    first_64_bits, sha256 = _FIRST_64_BITS, hashlib.sha256
    return [t for t in task_ids if first_64_bits(sha256(t.encode()).digest())[0] % total == wanted]


def _owned_slice(start: int, stop: int, total: int, wanted: int) -> list[str]:
    return _owned(_FORKED_IDS[start:stop], total, wanted)


def _owned_in_parallel(task_ids: list[str], total: int, wanted: int, workers: int) -> list[str]:
    """Contiguous slices on forked workers, which inherit the ids instead of receiving them."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _FORKED_IDS
    _FORKED_IDS = task_ids
    step = -(-len(task_ids) // workers)
    bounds = [(start, min(start + step, len(task_ids))) for start in range(0, len(task_ids), step)]
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            parts = list(pool.map(_owned_slice, *zip(*bounds), [total] * len(bounds), [wanted] * len(bounds)))
    finally:
        _FORKED_IDS = []
    return [task_id for part in parts for task_id in part]


def validate_source_ids(task_ids: Sequence[str]) -> None:
    """Reject ids that cannot be sharded reproducibly: empty, random-looking, or repeated."""
    for task_id in task_ids:
        if not isinstance(task_id, str) or not task_id:
            raise ConfigError(f"source task id {task_id!r} must be a non-empty string")
        if task_id.startswith(RANDOM_ID_PREFIX):
            raise ConfigError(
                f"source task id {task_id!r} starts with {RANDOM_ID_PREFIX!r}, the prefix of "
                "random ids: a source stage must emit deterministic ids to be sharded"
            )
    if len(set(task_ids)) != len(task_ids):
        repeated = sorted(tid for tid, n in Counter(task_ids).items() if n > 1)
        shown = ", ".join(repeated[:5]) + (" ..." if len(repeated) > 5 else "")
        raise ConfigError(
            f"{len(repeated)} source task id(s) appear more than once in one listing: {shown}"
        )

"""Deterministic assignment of source tasks to logical shards.

``logical_shard = int(sha256(task_id)[:16 hex], 16) % total_shards + minimum_shard_index``

The formula and the ``NEMO_CURATOR_SLURM_ARRAY_*`` variable names are the reference
system's contract, kept exactly so submit scripts written for it work unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .errors import ConfigError

logger = logging.getLogger(__name__)

SHARD_INDEX_VAR = "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX"
TOTAL_SHARDS_VAR = "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS"
MINIMUM_SHARD_INDEX_VAR = "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX"
ENABLED_VAR = "NEMO_CURATOR_SLURM_ARRAY_ENABLED"
SLURM_INDEX_FALLBACK = "SLURM_ARRAY_TASK_ID"
SLURM_TOTAL_FALLBACK = "SLURM_ARRAY_TASK_COUNT"

FALSE_WORDS = frozenset({"0", "false", "no", "off"})
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
RANDOM_ID_PREFIX = "r"
_FIRST_64_BITS = struct.Struct(">Q").unpack_from


def shard_of(task_id: str, total_shards: int, minimum_shard_index: int = 0) -> int:
    """The logical shard that owns ``task_id``.

    The first 8 digest bytes read big-endian are the same integer as the first 16 hex
    characters, without building the hex string.
    """
    return _FIRST_64_BITS(hashlib.sha256(task_id.encode()).digest())[0] % total_shards + minimum_shard_index


@dataclass(frozen=True)
class ShardConfig:
    """Which logical shard this process runs, out of which range."""

    shard_index: int
    total_shards: int
    minimum_shard_index: int = 0

    def __post_init__(self) -> None:
        if self.total_shards <= 0:
            raise ConfigError(f"total_shards must be greater than zero, got {self.total_shards}")
        if self.minimum_shard_index < 0:
            raise ConfigError(
                f"minimum_shard_index must be non-negative, got {self.minimum_shard_index}"
            )
        if self.shard_index < 0:
            raise ConfigError(f"shard_index must be non-negative, got {self.shard_index}")

    @classmethod
    def single(cls) -> ShardConfig:
        """One implicit shard: an ordinary run that processes every task."""
        return cls(shard_index=0, total_shards=1, minimum_shard_index=0)

    @property
    def last_shard_index(self) -> int:
        return self.minimum_shard_index + self.total_shards - 1

    @property
    def in_range(self) -> bool:
        return self.minimum_shard_index <= self.shard_index <= self.last_shard_index

    def owns(self, task_id: str) -> bool:
        return shard_of(task_id, self.total_shards, self.minimum_shard_index) == self.shard_index

    def select(self, task_ids: Iterable[str]) -> list[str]:
        """The ids this shard owns, in input order; none (with a warning) when out of range."""
        if not self.in_range:
            logger.warning(
                "shard index %d is outside the assignable range %d..%d: it receives no tasks",
                self.shard_index,
                self.minimum_shard_index,
                self.last_shard_index,
            )
            return []
        sha256, first_64_bits, total = hashlib.sha256, _FIRST_64_BITS, self.total_shards
        wanted = self.shard_index - self.minimum_shard_index
        # shard_of() inlined: this loop runs over every source task of the run in every element.
        return [t for t in task_ids if first_64_bits(sha256(t.encode()).digest())[0] % total == wanted]


def _read_int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None


def _first_set(env: Mapping[str, str], *names: str) -> tuple[str, int] | None:
    for name in names:
        value = _read_int(env, name)
        if value is not None:
            return name, value
    return None


def sharding_enabled(env: Mapping[str, str]) -> bool:
    """``NEMO_CURATOR_SLURM_ARRAY_ENABLED``: true unless one of the false words."""
    raw = env.get(ENABLED_VAR)
    if raw is None or raw.strip() == "":
        return True
    word = raw.strip().lower()
    if word in FALSE_WORDS:
        return False
    if word in TRUE_WORDS:
        return True
    raise ConfigError(
        f"{ENABLED_VAR}={raw!r} is not a boolean; use one of "
        f"{', '.join(sorted(TRUE_WORDS))} or {', '.join(sorted(FALSE_WORDS))}"
    )


def shard_config_from_env(env: Mapping[str, str]) -> ShardConfig | None:
    """Read the array configuration, or None for an ordinary (unsharded) run.

    Empty values count as unset, so ``VAR=${VAR:-}`` in a submit script is harmless.
    Once either the index or the total is present, both are required: running with half a
    configuration would silently process the wrong tasks.
    """
    if not sharding_enabled(env):
        return None
    index = _first_set(env, SHARD_INDEX_VAR, SLURM_INDEX_FALLBACK)
    total = _first_set(env, TOTAL_SHARDS_VAR, SLURM_TOTAL_FALLBACK)
    minimum = _read_int(env, MINIMUM_SHARD_INDEX_VAR)
    if index is None and total is None:
        if minimum is not None:
            logger.warning(
                "%s is set but neither a shard index nor a total is: running unsharded",
                MINIMUM_SHARD_INDEX_VAR,
            )
        return None
    if index is None:
        raise ConfigError(
            f"{total[0]}={total[1]} is set but no shard index is: set "
            f"{SHARD_INDEX_VAR} (or run inside a SLURM array, which sets {SLURM_INDEX_FALLBACK})"
        )
    if total is None:
        raise ConfigError(
            f"{index[0]}={index[1]} is set but no total is: set {TOTAL_SHARDS_VAR} "
            f"(or {SLURM_TOTAL_FALLBACK})"
        )
    if total[1] <= 0:
        raise ConfigError(f"{total[0]}={total[1]}: the total number of shards must be > 0")
    if index[1] < 0:
        raise ConfigError(f"{index[0]}={index[1]}: the shard index must be non-negative")
    if minimum is not None and minimum < 0:
        raise ConfigError(
            f"{MINIMUM_SHARD_INDEX_VAR}={minimum}: the minimum shard index must be non-negative"
        )
    return ShardConfig(shard_index=index[1], total_shards=total[1], minimum_shard_index=minimum or 0)


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

"""From an environment mapping to what this process runs: its job and its logical shard.

This is the one place that turns variables into a shard. The entrypoint uses it to say
why it chose a shard and a Ray client; ``curator-array run`` uses it to run that shard.
Both read the same mapping with the same rules, so nothing is handed on through
``os.environ``.

The rules, in order of precedence:

* ``NEMO_CURATOR_SLURM_ARRAY_*`` (the reference system's names) win. Without them, the
  index is ``SLURM_ARRAY_TASK_ID + SHARD_INDEX_OFFSET`` and the total ``TOTAL_SHARDS``,
  else ``SLURM_ARRAY_TASK_COUNT``; the minimum is ``MINIMUM_SHARD_INDEX`` (default 0).
* When a submit variable (``SHARD_INDEX_OFFSET``, ``TOTAL_SHARDS``,
  ``MINIMUM_SHARD_INDEX``) is set as well, both must agree.
* Half a configuration (an index without a total, or the reverse) is an error, and so is
  a total guessed from ``SLURM_ARRAY_TASK_COUNT`` where it cannot be right: a window with
  an offset, or an array with gaps (a retry).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.errors import ConfigError
from ..core.options import parse_bool
from ..core.sharding import ShardConfig
from .jobenv import JobEnvironment, env_int

logger = logging.getLogger(__name__)

SHARD_INDEX_VAR = "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX"
TOTAL_SHARDS_VAR = "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS"
MINIMUM_SHARD_INDEX_VAR = "NEMO_CURATOR_SLURM_ARRAY_MINIMUM_SHARD_INDEX"
ENABLED_VAR = "NEMO_CURATOR_SLURM_ARRAY_ENABLED"
SUBMIT_VARS = ("SHARD_INDEX_OFFSET", "TOTAL_SHARDS", "MINIMUM_SHARD_INDEX")



def sharding_enabled(env: Mapping[str, str]) -> bool:
    """``NEMO_CURATOR_SLURM_ARRAY_ENABLED``: true unless one of the false words."""
    raw = env.get(ENABLED_VAR)
    if raw is None or raw.strip() == "":
        return True
    try:
        return parse_bool(raw)
    except ValueError as problem:
        raise ConfigError(f"{ENABLED_VAR}={raw!r} is {problem}") from None


@dataclass(frozen=True)
class _Value:
    """One resolved number and the sentence that explains where it came from."""

    value: int
    reason: str


def _agree(name: str, explicit: int | None, derived: _Value | None) -> None:
    if explicit is not None and derived is not None and explicit != derived.value:
        raise ConfigError(
            f"{name}={explicit} conflicts with the submit variables, which give {derived.value} "
            f"({derived.reason}); unset {name} or fix {', '.join(SUBMIT_VARS)}"
        )


def _total_from_array_size(env: Mapping[str, str], offset: int | None) -> _Value | None:
    count = env_int(env, "SLURM_ARRAY_TASK_COUNT", minimum=1)
    if count is None:
        return None
    if offset:
        raise ConfigError(
            f"SHARD_INDEX_OFFSET={offset} needs TOTAL_SHARDS: a windowed submission cannot know "
            "the run's total from the size of one window"
        )
    low = env_int(env, "SLURM_ARRAY_TASK_MIN", minimum=0)
    high = env_int(env, "SLURM_ARRAY_TASK_MAX", minimum=0)
    if low is not None and high is not None and high - low + 1 != count:
        raise ConfigError(
            f"the array has gaps ({count} tasks between {low} and {high}), as in a retry: set "
            "TOTAL_SHARDS to the original run's total (curator-array retry --format fields prints it)"
        )
    return _Value(count, "from SLURM_ARRAY_TASK_COUNT (TOTAL_SHARDS unset)")


def resolve_shard(env: Mapping[str, str]) -> tuple[ShardConfig | None, tuple[str, ...]]:
    """The logical shard this environment asks for (None: unsharded), and why."""
    if not sharding_enabled(env):
        return None, (f"sharding disabled by {ENABLED_VAR}",)
    task_id = env_int(env, "SLURM_ARRAY_TASK_ID", minimum=0)
    offset = env_int(env, "SHARD_INDEX_OFFSET", minimum=0)
    total_var = env_int(env, "TOTAL_SHARDS", minimum=1)
    minimum_var = env_int(env, "MINIMUM_SHARD_INDEX", minimum=0)
    nemo_index = env_int(env, SHARD_INDEX_VAR, minimum=0)
    nemo_total = env_int(env, TOTAL_SHARDS_VAR, minimum=1)
    nemo_minimum = env_int(env, MINIMUM_SHARD_INDEX_VAR, minimum=0)
    submit_convention = any(v is not None for v in (offset, total_var, minimum_var))

    derived_index = (
        _Value(task_id + (offset or 0), f"SLURM_ARRAY_TASK_ID {task_id} + SHARD_INDEX_OFFSET {offset or 0}")
        if task_id is not None else None
    )
    derived_total = (
        _Value(total_var, "from TOTAL_SHARDS") if total_var is not None
        else _total_from_array_size(env, offset) if task_id is not None and nemo_total is None else None
    )
    derived_minimum = _Value(minimum_var, "from MINIMUM_SHARD_INDEX") if minimum_var is not None else None
    if submit_convention:
        _agree(SHARD_INDEX_VAR, nemo_index, derived_index)
        _agree(TOTAL_SHARDS_VAR, nemo_total, derived_total)
        _agree(MINIMUM_SHARD_INDEX_VAR, nemo_minimum, derived_minimum)

    index = _Value(nemo_index, f"from {SHARD_INDEX_VAR}") if nemo_index is not None else derived_index
    total = _Value(nemo_total, f"from {TOTAL_SHARDS_VAR}") if nemo_total is not None else derived_total
    minimum = (
        _Value(nemo_minimum, f"from {MINIMUM_SHARD_INDEX_VAR}") if nemo_minimum is not None
        else derived_minimum or _Value(0, "default")
    )
    if index is None and total is None:
        if offset is not None or total_var is not None:
            raise ConfigError(
                "SHARD_INDEX_OFFSET/TOTAL_SHARDS are set but no shard index is: submit with "
                f"sbatch --array=... (which sets SLURM_ARRAY_TASK_ID) or set {SHARD_INDEX_VAR}"
            )
        if nemo_minimum is not None or minimum_var is not None:
            logger.warning("a minimum shard index is set but neither a shard index nor a total is: running unsharded")
        return None, ("not an array task: every source task runs as one implicit shard",)
    if index is None:
        raise ConfigError(
            f"a total of {total.value} shards is set ({total.reason}) but no shard index is: set "
            f"{SHARD_INDEX_VAR} (or run inside a SLURM array, which sets SLURM_ARRAY_TASK_ID)"
        )
    if total is None:
        raise ConfigError(
            f"shard index {index.value} is set ({index.reason}) but no total is: set TOTAL_SHARDS "
            f"(or {TOTAL_SHARDS_VAR}, or run inside a SLURM array, which sets SLURM_ARRAY_TASK_COUNT)"
        )
    shard = ShardConfig(index.value, total.value, minimum.value)
    reasons = (
        f"logical shard {index.value} {index.reason}",
        f"total {total.value} {total.reason}",
        f"minimum shard index {minimum.value} {minimum.reason}",
    )
    return shard, reasons


@dataclass(frozen=True)
class JobContext:
    """This process's job (what SLURM says) and shard (what it should run), with reasons."""

    job: JobEnvironment
    shard: ShardConfig | None
    reasons: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str], hostname: str | None = None) -> JobContext:
        job = JobEnvironment.from_env(env, hostname=hostname)
        shard, reasons = resolve_shard(env)
        return cls(job, shard, reasons)

    @property
    def cluster(self) -> str:
        """``slurm`` (one Ray cluster over the job's nodes) or ``local`` (a private head)."""
        return "slurm" if self.job.num_nodes > 1 else "local"

    def describe_shard(self) -> str:
        if self.shard is None:
            return "no array configuration: every source task runs as one implicit shard"
        return self.shard.describe()

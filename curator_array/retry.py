"""Retry discovery: which logical shards lack a completion manifest, as submit lines.

manifests → ``RetryPlan`` → windows → text. Each step is a small pure function, so the
output format (the reference system's contract) is easy to test on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arrays import format_array_expression
from .checkpoint import CheckpointLayout, read_run_config, scan_completion_manifests
from .errors import ConfigError

FORMATS = ("array", "fields")


@dataclass(frozen=True)
class RetryWindow:
    """One ``sbatch --array`` submission: physical indices plus the offset to add."""

    array_expression: str
    shard_index_offset: int


@dataclass(frozen=True)
class RetryPlan:
    minimum_shard_index: int
    total_shards: int
    incomplete: tuple[int, ...]

    @property
    def complete(self) -> bool:
        return not self.incomplete

    def windows(self, max_array_size: int | None = None) -> list[RetryWindow]:
        return array_windows(self.incomplete, max_array_size)


def array_windows(shards: tuple[int, ...] | list[int], max_array_size: int | None = None) -> list[RetryWindow]:
    """One window for everything, or windows whose array indices stay below the limit.

    ``offset = shard // M * M`` keeps every physical index in ``0..M-1``.
    """
    if not shards:
        return []
    if max_array_size is None:
        return [RetryWindow(format_array_expression(shards), 0)]
    if max_array_size < 1:
        raise ConfigError(f"--max-array-size must be at least 1, got {max_array_size}")
    groups: dict[int, list[int]] = {}
    for shard in sorted(shards):
        offset = shard // max_array_size * max_array_size
        groups.setdefault(offset, []).append(shard - offset)
    return [RetryWindow(format_array_expression(indices), offset) for offset, indices in sorted(groups.items())]


def plan_retry(layout: CheckpointLayout) -> RetryPlan:
    run = read_run_config(layout)
    done = scan_completion_manifests(layout, run).shards
    everything = range(run.minimum_shard_index, run.minimum_shard_index + run.total_shards)
    return RetryPlan(
        minimum_shard_index=run.minimum_shard_index,
        total_shards=run.total_shards,
        incomplete=tuple(shard for shard in everything if shard not in done),
    )


def format_retry(plan: RetryPlan, output_format: str = "array", max_array_size: int | None = None) -> str:
    """The text ``curator-array retry`` prints: empty when every shard is complete."""
    if output_format not in FORMATS:
        raise ConfigError(f"unknown format {output_format!r}; use one of {', '.join(FORMATS)}")
    if max_array_size is not None and output_format != "fields":
        raise ConfigError(
            "--max-array-size needs --format fields: each window has its own SHARD_INDEX_OFFSET"
        )
    lines = []
    for window in plan.windows(max_array_size):
        if output_format == "array":
            lines.append(window.array_expression)
        else:
            lines.append(
                f"{window.array_expression} {window.shard_index_offset} "
                f"{plan.minimum_shard_index} {plan.total_shards}"
            )
    return "".join(line + "\n" for line in lines)

"""Retry discovery: which logical shards lack a completion manifest, as submit lines.

manifests → ``RetryPlan`` → windows → text. Each step is a small pure function, so the
output format (the reference system's contract) is easy to test on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arrays import ArrayWindow
from .checkpoint import scan_completion_manifests
from .errors import ConfigError
from .layout import CheckpointLayout
from .phase import PhaseState
from .run_contract import read_run_config
from .sharding import ShardRange

RETRY_FORMATS = ("array", "fields")


@dataclass(frozen=True)
class RetryPlan:
    shards: ShardRange
    incomplete: tuple[int, ...]

    @property
    def complete(self) -> bool:
        return not self.incomplete

    def windows(self, max_array_size: int | None = None) -> list[ArrayWindow]:
        return self.shards.windows(self.incomplete, max_array_size)


def plan_retry(layout: CheckpointLayout) -> RetryPlan:
    run = read_run_config(layout)
    done = scan_completion_manifests(layout, run).shards
    return RetryPlan(run.shards, tuple(shard for shard in run.shards if shard not in done))


def format_phase_retry(state: PhaseState, output_format: str = "array", max_array_size: int | None = None) -> str:
    """``format_retry`` for the missing elements of any phase. In the fields format each line
    is as the phase says (``Phase.retry_fields``): the first phase prints the spec's four
    fields, a later one adds a fifth naming it (its elements take ``--phase PHASE``, and
    TOTAL_SHARDS is the phase's element count)."""
    text = format_retry(RetryPlan(state.elements, state.missing), output_format, max_array_size)
    if output_format == "fields":
        text = "".join(f"{state.phase.retry_fields(line)}\n" for line in text.splitlines())
    return text


def format_retry(plan: RetryPlan, output_format: str = "array", max_array_size: int | None = None) -> str:
    """The text ``curator-array retry`` prints: empty when every shard is complete."""
    if output_format not in RETRY_FORMATS:
        raise ConfigError(f"unknown format {output_format!r}; use one of {', '.join(RETRY_FORMATS)}")
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
                f"{plan.shards.minimum} {plan.shards.total}"
            )
    return "".join(line + "\n" for line in lines)

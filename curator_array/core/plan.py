"""How a listing of source tasks would spread over logical shards (``curator-array plan``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .arrays import format_array_expression
from .sharding import ShardRange, validate_source_ids


@dataclass(frozen=True)
class PlannedTask:
    task_id: str
    shard: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class ShardPlan:
    shards: ShardRange
    tasks: tuple[PlannedTask, ...]

    @property
    def counts(self) -> dict[int, int]:
        counts = dict.fromkeys(self.shards, 0)
        for task in self.tasks:
            counts[task.shard] += 1
        return counts

    @property
    def empty_shards(self) -> list[int]:
        return [s for s, n in self.counts.items() if n == 0]

    @property
    def imbalance(self) -> float:
        """max / mean tasks per shard (1.0 is perfectly even; 0 when there are no tasks)."""
        counts = list(self.counts.values())
        mean = sum(counts) / len(counts)
        return max(counts) / mean if mean else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.shards.to_json(),
            "tasks": [
                {"task_id": t.task_id, "shard": t.shard, "files": list(t.files)} for t in self.tasks
            ],
        }


def plan_shards(listing: Sequence[tuple[str, Sequence[str]]], shards: ShardRange) -> ShardPlan:
    """``listing`` is (task id, files) pairs in source order."""
    validate_source_ids([task_id for task_id, _ in listing])
    tasks = tuple(PlannedTask(task_id, shards.shard_of(task_id), tuple(files)) for task_id, files in listing)
    return ShardPlan(shards, tasks)


def format_plan(plan: ShardPlan) -> str:
    counts = plan.counts
    values = list(counts.values())
    mean = sum(values) / len(values)
    lines = [
        f"{len(plan.tasks)} source tasks over {plan.shards.total} shards (logical {plan.shards})",
        f"tasks per shard: min {min(values)}, mean {mean:.2f}, max {max(values)} "
        f"(max/mean {plan.imbalance:.2f})",
        f"empty shards: {format_array_expression(plan.empty_shards) or 'none'}",
        "",
        "shard  tasks",
    ]
    lines += [f"{shard:>5}  {count}" for shard, count in counts.items()]
    lines += ["", f"{'task_id':<36}  {'shard':>5}  files"]
    lines += [f"{t.task_id:<36}  {t.shard:>5}  {' '.join(t.files)}" for t in plan.tasks]
    return "\n".join(lines) + "\n"

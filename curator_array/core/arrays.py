"""SLURM array expressions (``1-2,5-10,99``): format sorted indices, parse them back, and
split shards into submission windows under a ``MaxArraySize``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class ArrayWindow:
    """One ``sbatch --array`` submission: physical indices plus the offset to add."""

    array_expression: str
    shard_index_offset: int


def array_windows(shards: Sequence[int], max_array_size: int | None = None) -> list[ArrayWindow]:
    """One window for everything, or windows whose array indices stay below the limit.

    ``offset = shard // M * M`` keeps every physical index in ``0..M-1`` (SLURM's
    ``MaxArraySize`` bounds the index, not the count).
    """
    if not shards:
        return []
    if max_array_size is None:
        return [ArrayWindow(format_array_expression(shards), 0)]
    if max_array_size < 1:
        raise ConfigError(f"--max-array-size must be at least 1, got {max_array_size}")
    groups: dict[int, list[int]] = {}
    for shard in sorted(set(shards)):
        offset = shard // max_array_size * max_array_size
        groups.setdefault(offset, []).append(shard - offset)
    return [ArrayWindow(format_array_expression(indices), offset) for offset, indices in sorted(groups.items())]


def format_array_expression(indices: Iterable[int]) -> str:
    """Compress indices into SLURM's range syntax; runs of two or more become ``a-b``."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = prev = None
    for index in ordered:
        if prev is not None and index == prev + 1:
            prev = index
            continue
        if start is not None:
            parts.append(_range_text(start, prev))
        start = prev = index
    if start is not None:
        parts.append(_range_text(start, prev))
    return ",".join(parts)


def _range_text(start: int, end: int) -> str:
    return str(start) if start == end else f"{start}-{end}"


def parse_array_expression(expression: str) -> list[int]:
    """Expand ``0-3,7,10-20:5`` (SLURM's step syntax included) into sorted indices.

    A ``%N`` throttle suffix is accepted and ignored: it limits concurrency, not membership.
    """
    text = expression.strip().split("%", 1)[0]
    if not text:
        raise ConfigError("empty array expression")
    indices: set[int] = set()
    for part in text.split(","):
        try:
            indices.update(_expand_part(part.strip()))
        except ValueError:
            raise ConfigError(
                f"invalid array expression {expression!r}: cannot read {part!r} "
                "(expected forms: 7, 0-9, 0-9:2)"
            ) from None
    return sorted(indices)


def _expand_part(part: str) -> range:
    step = 1
    if ":" in part:
        part, step_text = part.split(":", 1)
        step = int(step_text)
    if "-" in part:
        low_text, high_text = part.split("-", 1)
        low, high = int(low_text), int(high_text)
    else:
        low = high = int(part)
    if low < 0 or high < low or step < 1:
        raise ValueError(part)
    return range(low, high + 1, step)

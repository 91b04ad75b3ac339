"""The report's charts, drawn by matplotlib as inline SVG text.

Large runs are aggregated: the shard grid shows at most ``GRID_CELLS`` cells, the node
chart the busiest ``TOP_NODES`` nodes. Every function returns SVG markup (or the data
behind it); the page template places it.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ..core.counts import Histogram
from ..core.errors import ConfigError
from ..core.records.shard import CompletionManifest

GRID_CELLS = 2500
TOP_NODES = 8
TIME_BINS = 40  # bars over the run's wall time, each at least a second wide
STATE_COLORS = {"complete": "#2e7d32", "running": "#1e88e5", "pending": "#fbc02d", "failed": "#c62828",
                "waiting": "#bdbdbd"}
# A cell standing for several shards shows the state that needs attention first.
STATE_PRIORITY = ("failed", "running", "pending", "waiting", "complete")


def require_matplotlib() -> None:
    """Fail with the install command before any chart is drawn, not with an ImportError inside one."""
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        raise ConfigError("curator-array report draws its charts with matplotlib: "
                          "pip install 'curator-array[report]'") from None


def _figure(width: float, height: float):
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams["svg.hashsalt"] = "curator-array"  # the same run gives the same file
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _svg(figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _no_data(axes) -> None:
    """An empty chart says so instead of drawing axes with nothing on them."""
    axes.set_axis_off()
    axes.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=axes.transAxes, color="#78909c")


def _whole_numbers(axis) -> None:
    """Counts get whole-number ticks (no 0.5 shards)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _timestamp(value: str | None) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Grid:
    columns: int
    per_cell: int
    cells: list[str]  # a state per cell


def shard_grid(states: dict[str, list[int]], shards: list[int]) -> Grid:
    state_of = {shard: name for name, members in states.items() for shard in members}
    per_cell = max(1, math.ceil(len(shards) / GRID_CELLS))
    cells = []
    for start in range(0, len(shards), per_cell):
        present = {state_of[s] for s in shards[start:start + per_cell]}
        cells.append(next(state for state in STATE_PRIORITY if state in present))
    return Grid(max(1, math.ceil(math.sqrt(len(cells) * 3))), per_cell, cells)


def grid_chart(grid: Grid) -> str:
    import numpy as np
    from matplotlib.colors import ListedColormap

    rows = math.ceil(len(grid.cells) / grid.columns)
    codes = {state: index for index, state in enumerate(STATE_COLORS)}
    values = np.full(rows * grid.columns, np.nan)
    values[:len(grid.cells)] = [codes[c] for c in grid.cells]
    width = max(3.0, min(9.0, 0.6 * grid.columns))
    figure = _figure(width, 0.9 + min(6.0, width * rows / grid.columns))
    axes = figure.add_subplot()
    axes.pcolormesh(values.reshape(rows, grid.columns), cmap=ListedColormap(list(STATE_COLORS.values())), vmin=0,
                    vmax=len(STATE_COLORS) - 1, edgecolors="white", linewidth=0.5 if len(grid.cells) <= 400 else 0.1)
    axes.set_aspect("equal")
    axes.invert_yaxis()
    axes.set_axis_off()
    return _svg(figure)


def duration_chart(durations: list[float]) -> str:
    figure = _figure(6, 2.8)
    axes = figure.add_subplot()
    if not durations:
        _no_data(axes)
        return _svg(figure)
    axes.hist(durations, bins=min(40, max(5, int(math.sqrt(len(durations))))), color="#546e7a")
    axes.set_xlabel("shard duration (s)")
    axes.set_ylabel("shards")
    _whole_numbers(axes.yaxis)
    return _svg(figure)


def rows_chart(rows_in: int, rows_out: int, dropped: dict[str, int], verb: str = "dropped") -> str:
    labels = ["rows in", "rows out", *(f"{verb}: {name}" for name in dropped)]
    values = [rows_in, rows_out, *dropped.values()]
    figure = _figure(6, max(2.2, 0.6 + 0.3 * len(labels)))
    axes = figure.add_subplot()
    if not rows_in:
        _no_data(axes)
        return _svg(figure)
    colors = ["#546e7a", "#2e7d32", *["#ef6c00"] * len(dropped)]
    bars = axes.barh(labels[::-1], values[::-1], color=colors[::-1])
    axes.bar_label(bars, labels=[f"{v:,}" for v in values[::-1]], fontsize=7, padding=2)
    axes.set_xlabel("rows")
    _whole_numbers(axes.xaxis)
    axes.tick_params(axis="y", labelsize=8)
    return _svg(figure)


def share_chart(held: dict[str, float], shares: dict[str, float]) -> str:
    """Each token-file set's part of the tokens the run holds beside its share of training
    (the mixture's), in per cent: where a set is repeated or cut."""
    names = sorted(shares, key=lambda name: -shares[name])
    figure = _figure(6, max(2.2, 0.6 + 0.35 * len(names)))
    axes = figure.add_subplot()
    if not names:
        _no_data(axes)
        return _svg(figure)
    total = sum(held.values()) or 1
    rows = range(len(names))[::-1]
    axes.barh([r + 0.2 for r in rows], [100 * held.get(n, 0) / total for n in names], height=0.4, color="#90a4ae",
              label="of the tokens held")
    axes.barh([r - 0.2 for r in rows], [shares[n] for n in names], height=0.4, color="#2e7d32",
              label="of training (the mixture)")
    axes.set_yticks(list(rows), names)
    axes.set_xlabel("per cent")
    axes.tick_params(axis="y", labelsize=7)
    axes.legend(fontsize=7)
    return _svg(figure)


def histogram_chart(histogram: Histogram) -> str:
    """How many things have each size (a phase's histogram: duplicate clusters by size, say)."""
    figure = _figure(6, 2.8)
    axes = figure.add_subplot()
    if not histogram.values:
        _no_data(axes)
        return _svg(figure)
    ordered = sorted(histogram.values.items())
    axes.bar([str(size) for size, _ in ordered], [count for _, count in ordered], color="#546e7a")
    axes.set_yscale("log")
    axes.set_xlabel(histogram.size_label)
    axes.set_ylabel(histogram.count_label)
    return _svg(figure)


def throughput_series(manifests: Iterable[CompletionManifest]) -> tuple[list[float], dict[str, list[float]]]:
    """Rows/s per node over time: each shard's rows spread evenly over its run on its node, in
    bins of a width that fits the run (a 40th of its wall time, at least a second)."""
    spans = []
    for manifest in manifests:
        began, ended = _timestamp(manifest.started_at), _timestamp(manifest.ended_at)
        if began is None or ended is None:
            continue
        if manifest.duration_s:  # measured, where the timestamps of older records have whole seconds
            ended = began + manifest.duration_s
        spans.append((manifest.job.node, began, max(ended, began + 1e-3), manifest.work.counts.rows_in))
    if not spans:
        return [], {}
    start, end = min(s[1] for s in spans), max(s[2] for s in spans)
    width = max((end - start) / TIME_BINS, 1.0)
    bins = max(1, math.ceil((end - start) / width))
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0] * bins)
    for node, began, ended, rows in spans:
        rate = rows / (ended - began)
        first, last = int((began - start) // width), min(bins - 1, int((ended - start) // width))
        for index in range(first, last + 1):
            overlap = min(ended, start + (index + 1) * width) - max(began, start + index * width)
            totals[node][index] += rate * max(overlap, 0.0) / width
    busiest = sorted(totals, key=lambda n: -sum(totals[n]))
    series = {node: totals[node] for node in busiest[:TOP_NODES]}
    if len(busiest) > TOP_NODES:
        series[f"{len(busiest) - TOP_NODES} other nodes"] = [sum(totals[n][i] for n in busiest[TOP_NODES:])
                                                            for i in range(bins)]
    return [i * width for i in range(bins)], series


def throughput_chart(times: list[float], series: dict[str, list[float]]) -> str:
    """Stacked bars, one colour per node; a bar with rows has the id ``throughput-<bin>-<node>``."""
    figure = _figure(9, 3)
    axes = figure.add_subplot()
    if not series:
        _no_data(axes)
        return _svg(figure)
    width = times[1] - times[0] if len(times) > 1 else 1.0
    below = [0.0] * len(times)
    for number, (node, values) in enumerate(series.items()):
        bars = axes.bar(times, values, width=width, bottom=below, align="edge", label=node, linewidth=0)
        for index, (bar, value) in enumerate(zip(bars, values)):
            if value > 0:
                bar.set_gid(f"throughput-{index}-{number}")
        below = [b + v for b, v in zip(below, values)]
    axes.set_xlabel("seconds since the first shard started")
    axes.set_ylabel("rows/s")
    axes.legend(fontsize=7, ncol=min(4, len(series)), frameon=False)
    return _svg(figure)

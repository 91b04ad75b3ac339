"""``curator-array report``: one self-contained HTML page about a logical run.

Everything comes from the checkpoint (completion manifests, attempt records, run.json)
and, where SLURM answers, from ``squeue``. The charts are drawn by matplotlib as inline
SVG; the page has no script and loads nothing, so it can be mailed, archived or opened
offline. Large runs are aggregated: the shard grid shows at most ``GRID_CELLS`` cells,
the node chart the busiest ``TOP_NODES`` nodes, the failure table its first rows.
"""

from __future__ import annotations

import html
import io
import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .retry import format_retry, plan_retry
from .status import RunStatus, shard_states

GRID_CELLS = 2500
TOP_NODES = 8
FAILURE_ROWS = 200
TIME_BINS = 120
REPORT_FIELDS = ("duration_s", "started_at", "ended_at", "rows_in", "rows_out", "bytes_in", "rows_dropped_by_stage",
                 "slurm_node_name", "hostname", "hostnames")
STATE_COLORS = {"complete": "#2e7d32", "running": "#1e88e5", "pending": "#fbc02d", "failed": "#c62828",
                "waiting": "#bdbdbd"}
# A cell standing for several shards shows the state that needs attention first.
STATE_PRIORITY = ("failed", "running", "pending", "waiting", "complete")


def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError("curator-array report draws with matplotlib: pip install 'curator-array[report]'") from None
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "curator-array"  # the same run gives the same file
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _svg(figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _timestamp(value: Any) -> float | None:
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


def grid_legend(grid: Grid) -> str:
    unit = "one shard, in order" if grid.per_cell == 1 else f"{grid.per_cell:,} shards, in order (the state needing attention first)"
    keys = "".join(f'<span class="key" style="background:{color}"></span>{state} ' for state, color in STATE_COLORS.items())
    return f'<p class="muted">Each cell: {unit}. {keys}</p>'



def duration_chart(durations: list[float]) -> str:
    figure = _figure(6, 2.8)
    axes = figure.add_subplot()
    if durations:
        axes.hist(durations, bins=min(40, max(5, int(math.sqrt(len(durations))))), color="#546e7a")
    axes.set_xlabel("shard duration (s)")
    axes.set_ylabel("shards")
    return _svg(figure)


def rows_chart(rows_in: int, rows_out: int, dropped: dict[str, int]) -> str:
    labels = ["rows in", "rows out", *(f"dropped: {name}" for name in dropped)]
    values = [rows_in, rows_out, *dropped.values()]
    figure = _figure(6, max(2.2, 0.6 + 0.3 * len(labels)))
    axes = figure.add_subplot()
    colors = ["#546e7a", "#2e7d32", *["#ef6c00"] * len(dropped)]
    bars = axes.barh(labels[::-1], values[::-1], color=colors[::-1])
    axes.bar_label(bars, labels=[f"{v:,}" for v in values[::-1]], fontsize=7, padding=2)
    axes.set_xlabel("rows")
    axes.tick_params(axis="y", labelsize=8)
    return _svg(figure)


def throughput_series(records: dict[int, dict[str, Any]]) -> tuple[list[float], dict[str, list[float]]]:
    """Rows/s per node over time: each shard's rows spread evenly over its run on its node."""
    spans = []
    for record in records.values():
        began, ended = _timestamp(record.get("started_at")), _timestamp(record.get("ended_at"))
        if began is None or ended is None:
            continue
        node = record.get("slurm_node_name") or record.get("hostname") or "?"
        spans.append((node, began, max(ended, began + 1e-3), int(record.get("rows_in") or 0)))
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
    figure = _figure(9, 3)
    axes = figure.add_subplot()
    for node, values in series.items():
        axes.plot(times, values, label=node, linewidth=1.2)
    axes.set_xlabel("seconds since the first shard started")
    axes.set_ylabel("rows/s")
    if series:
        axes.legend(fontsize=7, ncol=min(4, len(series)), frameon=False)
    return _svg(figure)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1100px;color:#212121}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e0e0e0}
.muted{color:#616161}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{border:1px solid #e0e0e0;border-radius:6px;padding:8px 14px;min-width:92px}
.card b{display:block;font-size:20px}table{border-collapse:collapse;width:100%;font-size:13px}
td,th{border-bottom:1px solid #eeeeee;padding:4px 6px;text-align:left;vertical-align:top}
pre{background:#f5f5f5;padding:10px;border-radius:4px;overflow-x:auto}svg{max-width:100%;height:auto}
.key{display:inline-block;width:11px;height:11px;margin:0 4px 0 8px;border-radius:2px;vertical-align:-1px}
table{table-layout:fixed}td{overflow-wrap:anywhere}.failed{color:#c62828}.complete{color:#2e7d32}.running{color:#1e88e5}.pending{color:#b28704}
"""


def _failure_rows(status: RunStatus, states: dict[str, list[int]]) -> list[tuple[int | None, str, str, str]]:
    open_failures = set(states["failed"]) | set(states["running"]) | set(states["pending"]) | set(states["waiting"])
    rows = []
    for attempt in status.failed_attempts:
        if attempt.shard_index in open_failures or attempt.shard_index is None:
            rows.append((attempt.shard_index, attempt.attempt, attempt.reason, str(attempt.path)))
    return rows


def failure_table(failures: list[tuple[int | None, str, str, str]]) -> str:
    if not failures:
        return "<p>No failed attempt of an incomplete shard.</p>"
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(str(shard))}</td><td>{esc(attempt)}</td><td>{esc(reason)}</td><td>{esc(path)}</td></tr>"
                   for shard, attempt, reason, path in failures[:FAILURE_ROWS])
    more = f"<p class='muted'>and {len(failures) - FAILURE_ROWS:,} more</p>" if len(failures) > FAILURE_ROWS else ""
    return ('<table><colgroup><col style="width:7%"><col style="width:20%"><col style="width:43%">'
            '<col style="width:30%"></colgroup><tr><th>shard</th><th>attempt</th><th>reason</th><th>record</th></tr>'
            f"{rows}</table>{more}")


def render(status: RunStatus, retry_text: str, generated_at: str) -> str:
    states = shard_states(status)
    shards = list(status.shards)
    records = status.records
    durations = [float(r["duration_s"]) for r in records.values() if isinstance(r.get("duration_s"), (int, float))]
    dropped: Counter[str] = Counter()
    for record in records.values():
        dropped.update({k: v for k, v in (record.get("rows_dropped_by_stage") or {}).items() if isinstance(v, int)})
    rows_in, rows_out = status.totals["rows_in"], status.totals["rows_out"]
    times, series = throughput_series(records)
    failures = _failure_rows(status, states)
    grid = shard_grid(states, shards)
    esc = html.escape
    cards = "".join(f'<div class="card {name}"><b>{len(members):,}</b>{name}</div>' for name, members in states.items())
    site_hint = "curator-array retry --checkpoint-path " + esc(str(status.checkpoint)) + " --submit --site &lt;site&gt;"
    retry_block = (f"<pre>{esc(retry_text)}</pre><p>Resubmit exactly these windows with:</p><pre>{site_hint}</pre>"
                   if retry_text.strip() else "<p class='complete'>Every shard is complete: nothing to retry.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>curator-array run report</title><style>{CSS}</style></head><body>
<h1>curator-array run report</h1>
<p class="muted">{esc(str(status.checkpoint))} · generated {esc(generated_at)} · {status.shards.total:,} logical shards
({esc(str(status.shards))}){f" · {status.source_task_count:,} source tasks" if status.source_task_count is not None else ""}</p>
<div class="cards" id="counts">{cards}<div class="card"><b>{rows_in:,}</b>rows in</div>
<div class="card"><b>{rows_out:,}</b>rows out</div></div>
<h2>Shards</h2>{grid_legend(grid)}{grid_chart(grid)}
<h2>Shard durations</h2>{duration_chart(durations)}
<h2>Rows in, rows out, drops per filter</h2>{rows_chart(rows_in, rows_out, dict(dropped.most_common()))}
<h2>Throughput over time, per node</h2>{throughput_chart(times, series)}
<h2 id="failures">Failures ({len(failures):,})</h2>
{failure_table(failures)}
<h2>Retry</h2>{retry_block}
</body></html>
"""


def write_report(layout, output: Path, queued: dict[int, str] | None = None) -> Path:
    from .atomic import write_bytes_atomic
    from .status import collect_status

    status = collect_status(type(layout)(Path(layout.root).resolve()), keep=REPORT_FIELDS)
    status.queued = queued or {}
    plan = plan_retry(layout)
    retry_text = format_retry(plan, "fields")
    page = render(status, retry_text, time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    output.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(output, page.encode())
    return output

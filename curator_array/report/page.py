"""The report page: data from the checkpoint, markup from a jinja2 template.

Python gathers values; ``templates/report.html.j2`` turns them into HTML with
autoescaping on, so no value (a failure reason, a path) can reach the page unescaped by
omission. The only markup that enters from Python is the charts' SVG, marked safe here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from markupsafe import Markup

from ..core.arrays import format_array_expression
from ..core.atomic import write_bytes_atomic
from ..core.counts import Histogram, show_figure, worth_showing
from ..core.layout import REMOVED_DIR, CheckpointLayout
from ..core.phase import PlannedPhase
from ..core.phase_states import blocked_by, earliest_incomplete
from ..core.records.run import OptionValue
from ..core.retry import format_phase_retry
from ..core.run_contract import RunConfig
from ..core.status import FailedAttempt, RunStatus, collect_status, shard_states
from . import charts

FAILURE_ROWS = 200


def open_failures(status: RunStatus, states: dict[str, list[int]]) -> list[FailedAttempt]:
    """Failed attempts of shards that are not complete (and records naming no shard)."""
    incomplete = set(states["failed"]) | set(states["running"]) | set(states["pending"]) | set(states["waiting"])
    return [a for a in status.failed_attempts if a.shard_index in incomplete or a.shard_index is None]


def option_rows(options: dict[str, OptionValue]) -> list[tuple[str, str, str]]:
    """(option, value, source) of every option, those set first."""
    rows = [(name, setting.shown, setting.source) for name, setting in options.items()]
    return sorted(rows, key=lambda row: (row[2] == "default", row[0]))


def phase_rows(status: RunStatus) -> list[dict]:
    """One row per phase, the first included: elements complete, what it counted, its longest element."""
    rows = []
    for state in status.phases:
        waiting = blocked_by(status.phases, state.phase) if not state.is_complete else None
        durations = [m.duration_s for m in state.manifests.values() if m.duration_s is not None]
        if state is status.phases[0] and status.duration_s:
            durations = [status.duration_s["max"]]
        memory = [m.peak_rss_mib for m in state.manifests.values() if m.peak_rss_mib is not None]
        figures = [f"{k.replace('_', ' ')} {v:,}" for k, v in state.totals().figures().items()]
        if (rate := state.rate()) is not None:
            figures.append(f"{rate:,.0f} {state.phase.counts.RATE}/s")
        rows.append({"phase": state.name, "complete": len(state.complete), "elements": state.elements.total,
                     "missing": format_array_expression(state.missing),
                     "blocked_by": waiting.name if waiting is not None else None, "counts": ", ".join(figures),
                     "longest_s": max(durations) if durations else None, "peak_mib": max(memory) if memory else None})
    return rows


def stage_rows(status: RunStatus) -> list[dict]:
    """Where the time went: every stage over all nodes, then per node when there are several."""
    rows = []
    for node, times in status.stage_tables():
        cpu = sum(time.cpu_s for time in times)
        rows += [{"node": node, "stage": time.stage, "cpu_s": time.cpu_s, "share": time.cpu_s / cpu if cpu else 0.0,
                  "wall_s": time.wall_s, "rows_per_s": time.rows_per_s, "queued_s": time.queued_s,
                  "outputs": time.outputs} for time in times]
    return rows


def phase_histograms(status: RunStatus) -> list[Histogram]:
    """Every histogram the phases counted (duplicate clusters by size, say)."""
    return [histogram for state in status.phases for histogram in state.totals().histograms()]


STATS_MEASURES = {"characters": "characters", "words": "words", "lines": "lines", "tokens": "tokens"}
STATS_GROUPS_SHOWN = 30
STATS_NAMES_SHOWN = 20  # domains and TLDs in the report (stats.json lists --stats-top)


def corpus_stats(status: RunStatus) -> dict | None:
    """The run's corpus statistics (``--stats``), as tables and the whole run's histograms."""
    stats = status.published().get("stats")
    if not stats:
        return None
    groups = stats["groups"]
    rows = [{"group": name, "documents": figures["documents"],
             **{measure: figures.get(measure) for measure in STATS_MEASURES}}
            for name, figures in sorted(groups.items(), key=lambda item: (item[0] != "all", -item[1]["documents"]))]
    whole = groups.get("all", {})
    charts_by_measure = {
        f"{label.capitalize()} per document": Markup(charts.histogram_chart(Histogram(
            {int(low): count for low, count in whole[measure]["histogram"].items()}, f"{label} per document",
            f"{label} per document (bin: at least)", "documents")))
        for measure, label in STATS_MEASURES.items() if measure in whole}
    return {"group_by": stats["group_by"], "rows": rows[:STATS_GROUPS_SHOWN], "groups": len(rows),
            "charts": charts_by_measure, "languages": _most(whole.get("languages", {})),
            "domains": _most(whole.get("domains", {}), STATS_NAMES_SHOWN),
            "distinct_domains": whole.get("distinct_domains", 0), "tlds": _most(whole.get("tlds", {}), STATS_NAMES_SHOWN)}


def _most(counts: dict[str, int], limit: int | None = None) -> dict[str, int]:
    """``counts`` from the most frequent down (ties by name), the first ``limit``."""
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit])


def set_shares(status: RunStatus) -> Markup | None:
    """The token-file sets' shares of training beside their tokens, when the run has several."""
    for state in status.later_phases:
        counts = state.totals()
        shares, held = getattr(counts, "share_by_set", None), getattr(counts, "tokens_by_set", None)
        if shares and len(shares) > 1:
            return Markup(charts.share_chart(held or {}, shares))  # matplotlib's own SVG output
    return None


def render(status: RunStatus, retry_text: str, generated_at: str) -> str:
    import jinja2

    states = shard_states(status)
    manifests = list(status.manifests.values())
    durations = [m.duration_s for m in manifests if m.duration_s is not None]
    dropped = status.dropped_by_step()
    rows_in, final = status.totals.rows_in, status.final
    rows_out = final.rows if final.rows is not None else status.totals.rows_out
    grid = charts.shard_grid(states, list(status.shards))
    svg = {
        "grid": charts.grid_chart(grid),
        "durations": charts.duration_chart(durations),
        "rows": charts.rows_chart(rows_in, rows_out, dropped, "would drop" if status.annotated else "dropped"),
        "throughput": charts.throughput_chart(*charts.throughput_series(manifests)),
    }
    histograms = {histogram.title: Markup(charts.histogram_chart(histogram))  # matplotlib's own SVG output
                  for histogram in phase_histograms(status)}
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    return environment.get_template("report.html.j2").render(
        checkpoint=str(status.checkpoint), generated_at=generated_at, shards=status.shards,
        source_task_count=status.source_task_count, state_counts={name: len(s) for name, s in states.items()},
        rows_in=rows_in, rows_out=rows_out, shards_per_cell=grid.per_cell, state_colors=charts.STATE_COLORS,
        charts={name: Markup(text) for name, text in svg.items()},  # matplotlib's own SVG output
        failures=open_failures(status, states), failure_rows=FAILURE_ROWS, retry_text=retry_text,
        request_id=status.request_id, options=option_rows(status.options),
        partial=sorted(status.partial.items())[:FAILURE_ROWS], partial_count=len(status.partial),
        resumed_tasks=status.resumed_tasks, finished_tasks=status.totals.source_tasks,
        phases=phase_rows(status), stage_rows=stage_rows(status), histograms=histograms,
        tokens=final.tokens or 0, rewritten_by=None if final.writer == status.phases[0].name else final.writer,
        contamination=contamination_rows(status), removed_dir=removed_dir(status),
        amendments=[amendment.describe() for amendment in status.amendments],
        corpus=corpus_stats(status), set_shares=set_shares(status),
        breakdowns={title: {name: show_figure(value) for name, value in worth_showing(values).items()}
                    for state in status.phases for title, values in state.totals().breakdowns().items()
                    if worth_showing(values)},
    )


def contamination_rows(status: RunStatus) -> dict | None:
    """What decontamination found, for the report: per eval task its figures and example
    hits, and the n-grams that hit the most documents across the run."""
    found = status.contamination
    if not found:
        return None
    tasks = [{"task": name, "documents": hits.documents, "ngrams": hits.ngrams, "characters": hits.characters_cut,
              "examples": [example.to_json() for example in found.examples.get(name, ())]}
             for name, hits in found.top_tasks()]
    ngrams = [{"ngram": text, "task": task, "documents": documents} for text, (task, documents) in found.ngrams.items()]
    return {"tasks": tasks, "ngrams": ngrams[:TOP_NGRAMS]}


TOP_NGRAMS = 20


def removed_dir(status: RunStatus) -> str | None:
    """Where the dropped documents are kept (``--keep-removed``), when the run kept them."""
    chosen = status.options.get("output_dir")
    directory = Path(chosen.value) / REMOVED_DIR if chosen is not None and chosen.value else None
    return directory.resolve().as_uri() if directory is not None and directory.is_dir() else None


def write_report(layout: CheckpointLayout, output: Path, plan_of: Callable[[RunConfig], list[PlannedPhase]],
                 queued: dict[str | None, dict[int, str]] | None = None, request_id: str | None = None) -> Path:
    """The report of the run in ``layout``; ``plan_of`` gives its phases (the registry's),
    ``queued`` what is still in SLURM's queue (``RunStatus.queued``)."""
    charts.require_matplotlib()
    status = collect_status(CheckpointLayout(Path(layout.root).resolve()), plan_of, keep_manifests=True,
                            request_id=request_id)
    status.queued = queued or {}
    first = earliest_incomplete(status.phases)
    retry_text = format_phase_retry(first, "fields") if first is not None else ""
    page = render(status, retry_text, time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    output.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(output, page.encode())
    return output

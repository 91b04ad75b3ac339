"""``status`` on a terminal: the run as text, and ``--watch``'s refreshing loop."""

from __future__ import annotations

from collections.abc import Callable

from ..core.arrays import format_array_expression
from ..core.counts import show_figure, worth_showing
from ..core.phase import PhaseState
from ..core.phase_states import blocked_by
from ..core.records.run import OptionValue
from ..core.records.shard import StageTime
from ..core.status import RunStatus, shard_states


def option_lines(options: dict[str, OptionValue]) -> list[str]:
    """``name=value (source)`` for every option not at its default."""
    return [f"{name}={setting.shown} ({setting.source})" for name, setting in sorted(options.items())
            if setting.source != "default"]


def figures_line(state: PhaseState) -> str:
    """What a phase counted, on one line (with its rate, when its counts name one)."""
    figures = [f"{name.replace('_', ' ')} {value:,}" for name, value in state.totals().figures().items()]
    rate = state.rate()
    if rate is not None:
        figures.append(f"{rate:,.0f} {state.phase.counts.RATE}/s")
    return ", ".join(figures)


def format_phases(status: RunStatus) -> list[str]:
    """Every phase the same way, the first included: complete, with its figures, or what is
    missing, failed, queued, or blocks it."""
    lines = ["phases"]
    width = max([11, *(len(state.name) + 1 for state in status.phases)])
    for state in status.phases:
        done = f"{len(state.complete)}/{state.elements.total}"
        queued = status.queued_of(state)
        if state.is_complete:
            shown = figures_line(state)
            lines.append(f"  {state.name:<{width}}{done} complete" + (f" ({shown})" if shown else ""))
            lines += [f"    {title}: " + ", ".join(f"{key} {show_figure(value)}" for key, value in shown.items())
                      for title, values in state.totals().breakdowns().items()
                      if (shown := worth_showing(values))]
            continue
        parts = [f"missing {format_array_expression(state.missing)}"]
        if state.progress:
            parts.append(state.progress)
        if queued:
            parts.append(f"queued {format_array_expression(queued)}")
        waiting = blocked_by(status.phases, state.phase)
        if waiting is not None:
            parts.append(f"blocked by {waiting.name} (missing {format_array_expression(waiting.missing)})")
        lines.append(f"  {state.name:<{width}}{done}; " + "; ".join(parts))
        for index, reason in sorted(state.failed.items())[:5]:
            lines.append(f"    element {index} failed: {reason}")
    return lines


def stage_line(time: StageTime, total_cpu_s: float, indent: str = "  ") -> str:
    rate = time.rows_per_s
    share = f"{time.cpu_s / total_cpu_s:4.0%}" if total_cpu_s > 0 else "   -"
    return (f"{indent}{time.stage:<22}{time.cpu_s:>10.2f} {share:>5}{time.wall_s:>10.2f}"
            f"{(f'{rate:,.0f}' if rate is not None else '-'):>12}{time.queued_s:>10.2f}")


def format_stage_times(status: RunStatus) -> list[str]:
    """Where the complete shards' time went, per stage, then per node when there are several:
    the stage with the largest CPU share bounds the run."""
    heading = f"  {'stage':<22}{'cpu s':>10} {'share':>5}{'wall s':>10}{'rows/s':>12}{'queued s':>10}"
    lines = ["stage time   (complete shards, summed over workers)", heading]
    for node, times in status.stage_tables():
        indent = "  "
        if node != "all nodes":
            lines.append(f"  on {node}:")
            indent = "    "
        cpu = sum(time.cpu_s for time in times)
        lines += [stage_line(time, cpu, indent) for time in times]
    return lines


def shards_named(shards: list[int]) -> str:
    """Shard numbers in words no one reads as a count: "none", "shard 0", "shards 2-3,5"."""
    if not shards:
        return "none"
    return f"shard{'s' if len(shards) > 1 else ''} {format_array_expression(shards)}"


def format_status(status: RunStatus) -> str:
    lines = [
        f"checkpoint   {status.checkpoint}",
        f"shards       {status.shards.total} (logical {status.shards})",
        f"complete     {len(status.completed)}/{status.shards.total}",
        f"unfinished   {shards_named(status.incomplete)}",
    ]
    if status.shards_queued:
        pending = [s for s, state in status.shards_queued.items() if state == "PENDING"]
        running = [s for s, state in status.shards_queued.items() if state != "PENDING"]
        lines.append(f"in queue     pending {format_array_expression(pending) or '-'}, "
                     f"running {format_array_expression(running) or '-'} (squeue)")
    if status.source_task_count is not None:
        lines.append(f"source tasks {status.source_task_count} in the whole run")
    t = status.totals
    final, writer = status.final_rows_out, status.last_writer
    if writer is status.phases[0]:
        rows_out = f"{t.rows_out:,} rows out, {t.output_file_count:,} output files" + (
            f", {t.tokens:,} tokens" if t.tokens else "")
    elif final is not None:
        rows_out = f"{final:,} rows out after {writer.name}"
    else:
        rows_out = f"{t.rows_out:,} rows out so far ({writer.name} will rewrite them)"
    recorded = sum(done for done, _, _ in status.partial.values())
    if recorded:
        lines.append(f"done so far  {t.source_tasks + recorded:,} tasks ({t.source_tasks:,} in complete shards, "
                     f"{recorded:,} on record in unfinished ones); complete shards: {t.rows_in:,} rows in, {rows_out}")
    else:
        lines.append(f"done so far  {t.source_tasks:,} tasks, {t.rows_in:,} rows in, {rows_out}")
    dropped = status.dropped_by_step()
    if dropped:
        lines.append(("would drop   " if status.annotated else "dropped      ") + ", ".join(f"{step} {count:,}" for step, count in dropped.items()))
    if status.contamination:
        lines += contamination_lines(status.contamination)
    for index, amendment in enumerate(status.amendments):
        lines.append(("amended      " if index == 0 else "             ") + amendment.describe())
    if status.request_id:
        chosen = option_lines(status.options)
        lines.append(f"options      {len(chosen)} set, the rest default (request {status.request_id}):")
        lines += [f"  {line}" for line in chosen]
    if status.duration_s:
        d = status.duration_s
        lines.append(f"shard time   min {d['min']:.1f}s, mean {d['mean']:.1f}s, max {d['max']:.1f}s")
    if status.cores_busy is not None:
        cpu, wall = status.busy
        lines.append(f"cores busy   {status.cores_busy:.2f} per element: the stages' {cpu:,.1f} CPU-s over "
                     f"{wall:,.1f} s of element time (process start to manifest)")
    if status.stage_times:
        lines += format_stage_times(status)
    if status.partial:
        lines.append(f"resumable    {len(status.partial)} incomplete shard(s) keep finished tasks for their next attempt:")
        for shard, (done, total, attempts) in sorted(status.partial.items())[:20]:
            lines.append(f"  shard {shard}: {done}/{total or '?'} tasks done in {attempts} attempt(s)")
    if status.resumed_tasks:
        lines.append(f"resumed      {status.resumed_tasks} task(s) of complete shards were kept from earlier attempts")
    lines += format_phases(status)
    if status.failed_attempts:
        lines.append(f"failed attempts ({len(status.failed_attempts)}):")
        for attempt in status.failed_attempts:
            later = " (shard completed later)" if attempt.shard_completed_later else ""
            lines.append(f"  shard {attempt.shard_index}: {attempt.reason}{later}  {attempt.path}")
    return "\n".join(lines) + "\n"


def format_watch(status: RunStatus, now: str) -> str:
    states = shard_states(status)
    counts = ", ".join(f"{name} {len(shards)}" for name, shards in states.items())
    lines = [f"{now}  {status.checkpoint}", f"{len(states['complete'])}/{status.shards.total} complete: {counts}"]
    for name in ("running", "pending", "failed", "waiting"):
        if states[name]:
            lines.append(f"  {name:<8}{format_array_expression(states[name])}")
    latest = {a.shard_index: a for a in status.failed_attempts if a.shard_index in states["failed"]}
    for shard, attempt in sorted(latest.items())[:10]:
        lines.append(f"  shard {shard}: {attempt.reason}  {attempt.path}")
    if status.later_phases:
        lines += format_phases(status)
    return "\n".join(lines) + "\n"


def watch(collect: Callable[[], RunStatus], echo: Callable[[str], None], sleep: Callable[[float], None],
          clock_text: Callable[[], str], interval_s: float, clear: bool) -> int:
    """Refresh until every shard and phase is complete (0) or nothing is left queued (3).

    ``collect`` returns a RunStatus with ``queued`` filled from squeue; the rest is injected
    so the loop can be tested without a terminal or a clock.
    """
    while True:
        status = collect()
        states = shard_states(status)
        echo(("\x1b[H\x1b[2J" if clear else "") + format_watch(status, clock_text()))
        if status.all_complete:
            echo("every shard is complete" + (" and every later phase\n" if status.later_phases else "\n"))
            return 0
        if not any(status.queued.values()):
            left = status.shards.total - len(states["complete"])
            phase = next((state for state in status.later_phases if not state.is_complete), None)
            what = (f"{left} shard(s) incomplete" if left or phase is None else
                    f"phase {phase.name} incomplete (missing {format_array_expression(phase.missing)})")
            how = (f"curator-array retry --checkpoint-path {status.checkpoint} --submit --site <site>" if status.submitted
                   else "this run was never submitted: run the same command again, finished tasks are kept")
            echo(f"nothing of this run is queued any more; {what}: {how}\n")
            return 3
        sleep(interval_s)


TOP_TASKS = 5


def contamination_lines(found) -> list[str]:
    """The eval tasks that leaked into the run most (--decontaminate), with their worst n-gram."""
    ranked = found.top_tasks()
    lines = [f"contaminated {len(ranked)} eval task(s); the top {min(len(ranked), TOP_TASKS)} by documents hit "
             "(curator-array report shows examples and the n-grams that hit most):"]
    for name, hits in ranked[:TOP_TASKS]:
        lines.append(f"  {name}: {hits.documents:,} documents, {hits.ngrams:,} n-grams matched, "
                     f"{hits.characters_cut:,} characters removed")
    lines.append("  (documents here are hits: one document may hit several tasks; `dropped` counts each "
                 "document once, under the first task it hits in the eval files' order)")
    return lines

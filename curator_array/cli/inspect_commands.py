"""``curator-array plan`` and ``status``: look at a run before and while it runs."""

from __future__ import annotations

import json

import click

from ..core.layout import CheckpointLayout
from ..core.status import DEPRECATED_KEYS
from .group import checkpoint_option, cli, run_option


@cli.command(epilog="""\b
Examples:
  curator-array status --checkpoint-path /shared/ckpt
  curator-array status --checkpoint-path /shared/ckpt --json | jq .run.phases[0].missing
  curator-array status --checkpoint-path /shared/ckpt --json | jq .run.final
  curator-array status --checkpoint-path /shared/ckpt --watch --interval 30

\b
With --watch: exit 0 once every shard is complete, 3 when nothing of the run is
queued any more and shards are still incomplete.

\b
With --json: "run" holds "phases" (every phase, the first included, each with its
elements, what is missing and its counts) and "final" (the run's output after the
last phase that rewrites it: written_by, complete, rows, files, tokens).
Deprecated keys, kept for this release:
""" + "\n".join(f"  {key:<17}use {instead}" for key, instead in DEPRECATED_KEYS.items()))
@checkpoint_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.option("--watch", is_flag=True, help="Refresh until the run is complete or nothing is left queued.")
@click.option("--interval", type=click.FloatRange(min=0.5), default=10, show_default=True,
              help="With --watch: seconds between refreshes.")
def status(checkpoint_path: str, as_json: bool, watch: bool, interval: float) -> None:
    """Show what is complete, running, pending and failed in a logical run."""
    import sys
    import time

    from ..core.status import collect_status
    from ..run.phases import PHASES
    from ..slurm.submit import latest_request, queued_phase_elements
    from .status_view import format_status
    from .status_view import watch as watch_loop

    layout = CheckpointLayout(checkpoint_path)

    def collect():
        result = collect_status(layout, PHASES.plan_of, request_id=latest_request(layout))
        result.queued = queued_phase_elements(layout)
        return result

    if watch:
        code = watch_loop(collect, lambda text: click.echo(text, nl=False), time.sleep,
                          lambda: time.strftime("%H:%M:%S"), interval, sys.stdout.isatty())
        raise click.exceptions.Exit(code)
    result = collect()
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        click.echo(format_status(result), nl=False)


@cli.command(epilog="""\b
Examples:
  curator-array plan --input-dir /shared/data --total-shards 20
  curator-array plan --input-dir /shared/data --total-shards 20 --files-per-partition 4 --json
  curator-array plan --input-dir /shared/data --total-shards 20 --freeze --checkpoint-path /shared/ckpt
""")
@run_option("input_dir", required=True, from_environment=True,
            help="Input directory to plan (required: plan lists files; env: INPUT_DIR).")
@click.option("--total-shards", required=True, type=click.IntRange(min=1), envvar="TOTAL_SHARDS",
              help="Number of logical shards (env: TOTAL_SHARDS).")
@click.option("--minimum-shard-index", type=click.IntRange(min=0), default=0, show_default=True,
              envvar="MINIMUM_SHARD_INDEX", help="First logical shard (env: MINIMUM_SHARD_INDEX).")
@run_option("files_per_partition", from_environment=True)
@run_option("input_file_type", from_environment=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.option("--freeze", is_flag=True,
              help="Also freeze this listing into --checkpoint-path, so no array element walks the input.")
@run_option("checkpoint_path", from_environment=True, help="With --freeze: the run's checkpoint directory (env: CHECKPOINT_PATH).")
def plan(input_dir, total_shards, minimum_shard_index, files_per_partition, input_file_type, as_json, freeze,
         checkpoint_path):
    """Show which logical shard each source task would go to, before submitting."""
    from ..core.plan import format_plan, plan_shards
    from ..core.sharding import ShardRange
    from ..stages.partition import FilePartitioningStage

    if freeze and not checkpoint_path:
        raise click.UsageError("--freeze needs --checkpoint-path (or CHECKPOINT_PATH)")
    shards = ShardRange(total_shards, minimum_shard_index)
    source = FilePartitioningStage(input_dir, input_file_type, files_per_partition)
    snapshot = source.snapshot()
    if freeze:
        freeze_listing(snapshot, CheckpointLayout(checkpoint_path), shards)
    listing = [(t.task_id, t.metadata["relative_files"]) for t in source.tasks_from(snapshot.table)]
    result = plan_shards(listing, shards)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(format_plan(result), nl=False)


def freeze_listing(snapshot, layout: CheckpointLayout, shards) -> None:
    """Write the listing and a run.json without a pipeline (the first start pins that)."""
    from ..core.run_contract import ensure_run_config
    from ..stages import listing as listings

    reference = listings.freeze(layout, snapshot)
    run = ensure_run_config(layout, shards, snapshot.task_ids, None, reference)
    if run.listing and run.listing.digest != reference.digest:
        from ..core.errors import CheckpointMismatchError

        raise CheckpointMismatchError(
            f"{layout.root} already holds a run with another frozen listing "
            f"({listings.load(layout, run.listing).differences(snapshot)}): use a new checkpoint path")
    click.echo(f"froze {snapshot.table.num_rows} files ({run.source_task_count} tasks) into {layout.listing_path(reference.file)}",
               err=True)


@cli.command(epilog="""\b
Examples:
  curator-array report --checkpoint-path /shared/ckpt -o report.html
""")
@checkpoint_option
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
def report(checkpoint_path: str, output: str) -> None:
    """Write one self-contained HTML page about the run: shard grid, durations, rows and
    drops per filter, throughput per node, failures and the retry command."""
    from pathlib import Path

    from ..report.page import write_report
    from ..run.phases import PHASES
    from ..slurm.submit import latest_request, queued_phase_elements

    layout = CheckpointLayout(checkpoint_path)
    path = write_report(layout, Path(output), PHASES.plan_of, queued_phase_elements(layout), latest_request(layout))
    click.echo(f"wrote {path} ({path.stat().st_size / 1024:,.0f} KiB)", err=True)

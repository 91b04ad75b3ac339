"""``curator-array submit``, ``retry`` and ``render-site``: from a checkpoint to sbatch lines.

Both submitting commands hold the run to its contract before anything is queued: the
pipeline that the run options describe must be the run's, and windows respect the
cluster's ``MaxArraySize`` unless told otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..core.errors import ConfigError, CuratorArrayError
from ..core.layout import CheckpointLayout
from ..core.retry import RETRY_FORMATS, format_phase_retry
from .group import checkpoint_option, cli, default_sites_dir
from .run_command import parse_run_args

EPILOG_RETRY = """\b
Examples:
  curator-array retry --checkpoint-path /shared/ckpt
  curator-array retry --checkpoint-path /shared/ckpt --format fields
  curator-array retry --checkpoint-path /shared/ckpt --format fields --max-array-size 1000
  curator-array retry --checkpoint-path /shared/ckpt --submit --site my-cluster -- --min-words 5

\b
Resubmit with the preserved fields:
  read -r ARRAY SHARD_INDEX_OFFSET MINIMUM_SHARD_INDEX TOTAL_SHARDS < <(
    curator-array retry --checkpoint-path "$CHECKPOINT_PATH" --format fields)
  SHARD_INDEX_OFFSET=$SHARD_INDEX_OFFSET MINIMUM_SHARD_INDEX=$MINIMUM_SHARD_INDEX \\
  TOTAL_SHARDS=$TOTAL_SHARDS sbatch --array="$ARRAY" site_configs/<cluster>.sbatch
"""

MAX_ARRAY_SIZE_HELP = ("'auto' (the cluster's MaxArraySize, from scontrol), 'none', or a number: "
                       "windows with offsets keep every array index below it (offset = shard // M * M).")


def site_files(sites_dir: str, site: str):
    """The site's settings and its rendered script (which must exist)."""
    from ..slurm.sites import load_site

    directory = Path(sites_dir)
    script = directory / f"{site}.sbatch"
    if not script.is_file():
        raise ConfigError(f"no rendered script {script}: run `curator-array render-site {site}` first")
    toml = directory / f"{site}.toml"
    return (load_site(toml) if toml.is_file() else None), str(script)


def print_or_submit(groups, layout: CheckpointLayout, dry_run: bool) -> None:
    """Queue (or print) each phase's windows, each phase after the one before."""
    from ..slurm.submit import chained, submit_phases

    if dry_run:
        for item in chained(groups):
            click.echo(item.command_line())
        return
    for job_id, item in submit_phases(groups, layout, os.environ):
        phase = "" if item.phase is None else f"  phase {item.phase} (after {':'.join(item.after) or '-'})"
        click.echo(f"{job_id}  --array={item.array_expression}  SHARD_INDEX_OFFSET={item.offset}{phase}")


@cli.command(epilog=EPILOG_RETRY, context_settings={"ignore_unknown_options": True})
@checkpoint_option
@click.option("--format", "output_format", type=click.Choice(RETRY_FORMATS), default="array", show_default=True,
              help="array: one array expression per line; fields: "
                   "ARRAY_EXPRESSION SHARD_INDEX_OFFSET MINIMUM_SHARD_INDEX TOTAL_SHARDS.")
@click.option("--max-array-size", default=None,
              help=MAX_ARRAY_SIZE_HELP + " Printing needs --format fields for it; --submit uses 'auto' by default.")
@click.option("--submit", "do_submit", is_flag=True, help="Resubmit the incomplete shards with --site.")
@click.option("--site", help="With --submit: the rendered site_configs/<site>.sbatch to use.")
@click.option("--sites-dir", default=default_sites_dir, show_default="site_configs",
              help="Directory with <site>.toml and templates/ (the site configs `render-site` writes).")
@click.option("--parallel", type=click.IntRange(min=1), help="With --submit: at most K elements at once.")
@click.option("--force", is_flag=True, help="With --submit: resubmit even while elements are still queued.")
@click.option("--dry-run", is_flag=True, help="With --submit: print the sbatch commands instead.")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def retry(checkpoint_path, output_format, max_array_size, do_submit, site, sites_dir, parallel, force, dry_run,
          run_args):
    """Print the logical shards that have no completion manifest (or resubmit them).

    Once every shard is complete, a run with later phases (--dedup) prints the missing
    elements of its earliest incomplete phase instead (the fields format adds the phase);
    --submit queues them and the phases after. Empty output means everything is complete. Run it after every submission of the
    run has finished: a shard still running has no manifest yet (--submit checks this).
    With --submit, the elements run the options the run's latest submission pinned, with
    the run options after `--` on top (they must keep the run's pipeline).
    """
    from ..core.phase_states import earliest_incomplete
    from ..run.phases import PHASES
    from ..run.submission import plan_retry_submit
    from ..slurm.submit import resolve_max_array_size

    layout = CheckpointLayout(checkpoint_path)
    states = PHASES.states(layout)
    first = earliest_incomplete(states)
    later = " and every later phase" if len(states) > 1 else ""
    if not do_submit:
        if site or run_args:
            raise click.UsageError("--site and run options only go with --submit")
        max_size = resolve_max_array_size(max_array_size, os.environ)
        if first is None:
            click.echo(f"all {states[0].elements.total} shards are complete{later}", err=True)
            return
        click.echo(format_phase_retry(first, output_format, max_size), nl=False)
        if not layout.submissions_file.is_file():
            click.echo("this run was never submitted: run the same `curator-array run` command again to finish "
                       "it (finished tasks are kept); the shards above are what it has left", err=True)
        elif first.phase.submitted_name is not None:
            click.echo(f"phase {first.name}: its elements run with --phase {first.name} and TOTAL_SHARDS="
                       f"{first.elements.total}; `retry --submit` queues them and the phases after", err=True)
        return
    if not site:
        raise click.UsageError("--submit needs --site")
    if first is None:
        click.echo(f"all {states[0].elements.total} shards are complete{later}; nothing to submit", err=True)
        return
    _, script = site_files(sites_dir, site)
    groups = plan_retry_submit(layout, parse_run_args(run_args), states, script, max_array_size, parallel,
                               os.environ, force=force, dry_run=dry_run)
    print_or_submit(groups, layout, dry_run)


@cli.command(context_settings={"ignore_unknown_options": True}, epilog="""\b
Examples:
  export INPUT_DIR=/shared/in OUTPUT_DIR=/shared/out      # as for sbatch
  curator-array submit --site example-pyxis --total-shards 20
  curator-array submit --site local --total-shards 10000 --parallel 50
  curator-array submit --site local --total-shards 6 --dry-run -- --drop-empty --min-words 5
  curator-array submit --site local --total-shards 6 --new-run -- --min-words 3
""")
@click.option("--site", required=True, help="A rendered site_configs/<site>.sbatch.")
@click.option("--total-shards", required=True, type=click.IntRange(min=1), help="Logical shards of the run.")
@click.option("--minimum-shard-index", type=click.IntRange(min=0), default=0, show_default=True,
              envvar="MINIMUM_SHARD_INDEX",
              help="First logical shard of the run: shards are MIN..MIN+TOTAL-1, so several runs can split "
                   "one array range (env: MINIMUM_SHARD_INDEX).")
@click.option("--array", "array_expression", help="Only these logical shards (default: all).")
@click.option("--max-array-size", default="auto", show_default=True, help=MAX_ARRAY_SIZE_HELP)
@click.option("--parallel", type=click.IntRange(min=1), help="At most this many elements running at once (%K).")
@click.option("--checkpoint-path", help="Checkpoint of the run (same as the run option; default: CHECKPOINT_PATH, "
              "else the output dir).")
@click.option("--sites-dir", default=default_sites_dir, show_default="site_configs",
              help="Directory with <site>.toml and templates/ (the site configs `render-site` writes).")
@click.option("--new-run", is_flag=True,
              help="If the checkpoint holds a run with another pipeline, shard range or listing, archive "
                   "its records and its outputs (all but the download cache) and start a new logical run "
                   "(refused while its elements are queued).")
@click.option("--force", is_flag=True, help="With --new-run: archive even while elements are still queued.")
@click.option("--dry-run", is_flag=True, help="Print the exact sbatch commands instead; change nothing.")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def submit(site, total_shards, minimum_shard_index, array_expression, max_array_size, parallel, checkpoint_path,
           sites_dir, new_run, force, dry_run, run_args):
    """Submit a logical run as sbatch --array windows of a site's script.

    Every run option (after `--`) is resolved here: flag, else the site's [env], else the
    environment, else the default; a bad value stops the submission. Before anything is
    queued, the run's contract is written (or checked, when the checkpoint already holds
    the run): shard range, input listing, pipeline, and the options, which every element
    then runs as pinned. The run's later phases (--dedup) are queued too, each phase after
    the one before (afterany: an element whose inputs are incomplete exits 2 at once).
    """
    from ..core.sharding import ShardRange
    from ..run.submission import plan_submit

    site_config, script = site_files(sites_dir, site)
    flags = parse_run_args(run_args)
    if checkpoint_path and flags.setdefault("checkpoint_path", checkpoint_path) != checkpoint_path:
        raise click.UsageError("--checkpoint-path is given twice with different values (before and after --)")
    layout, groups = plan_submit(flags, site_config, script, ShardRange(total_shards, minimum_shard_index),
                                 array_expression, max_array_size, parallel, os.environ, new_run=new_run, force=force,
                                 dry_run=dry_run, say=lambda text: click.echo(text, err=True))
    print_or_submit(groups, layout, dry_run)


@cli.command("render-site", epilog="""\b
Examples:
  curator-array render-site example-pyxis
  curator-array render-site --all
  curator-array render-site --all --check      # exit 1 when a committed script is stale
""")
@click.argument("names", nargs=-1)
@click.option("--all", "render_all", is_flag=True, help="Every site_configs/*.toml.")
@click.option("--sites-dir", type=click.Path(file_okay=False, exists=True), default=default_sites_dir,
              show_default="site_configs", help="Directory with <site>.toml and templates/.")
@click.option("--check", is_flag=True, help="Change nothing; fail if a rendered script is out of date.")
def render_site(names, render_all, sites_dir, check):
    """Render site_configs/<name>.toml into site_configs/<name>.sbatch."""
    from ..run.option_table import job_script_facts
    from ..slurm.sites import load_site, site_names, write_rendered
    from ..slurm.sites import render_site as render

    directory = Path(sites_dir)
    chosen = site_names(directory) if render_all else list(names)
    if not chosen:
        raise click.UsageError("name a site, or pass --all")
    stale = []
    for name in chosen:
        if check:
            text = render(load_site(directory / f"{name}.toml"), directory / "templates", job_script_facts())
            target = directory / f"{name}.sbatch"
            if not target.exists() or target.read_text() != text:
                stale.append(name)
            continue
        path, changed = write_rendered(directory, name, job_script_facts())
        click.echo(f"{path}: {'written' if changed else 'up to date'}")
    if stale:
        raise CuratorArrayError(f"stale rendered site scripts: {', '.join(stale)}; run `curator-array render-site --all`")

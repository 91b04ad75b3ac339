"""The ``curator-array`` command line.

Errors the user can act on are printed as one line on stderr (no traceback); exit code 2
means a usage or configuration error, 1 any other failure. Set CURATOR_ARRAY_DEBUG=1 to
see tracebacks.
"""

from __future__ import annotations

import json
import logging
import os
import sys

import click

from . import __version__
from .checkpoint import CheckpointLayout
from .errors import ConfigError, CuratorArrayError
from .retry import FORMATS, format_retry, plan_retry
from .stopping import ShardStopped, install_stop_handlers

EPILOG_RETRY = """\b
Examples:
  curator-array retry --checkpoint-path /shared/ckpt
  curator-array retry --checkpoint-path /shared/ckpt --format fields
  curator-array retry --checkpoint-path /shared/ckpt --format fields --max-array-size 1000

\b
Resubmit with the preserved fields:
  read -r ARRAY SHARD_INDEX_OFFSET MINIMUM_SHARD_INDEX TOTAL_SHARDS < <(
    curator-array retry --checkpoint-path "$CHECKPOINT_PATH" --format fields)
  SHARD_INDEX_OFFSET=$SHARD_INDEX_OFFSET MINIMUM_SHARD_INDEX=$MINIMUM_SHARD_INDEX \\
  TOTAL_SHARDS=$TOTAL_SHARDS sbatch --array="$ARRAY" site_configs/<cluster>.sbatch
"""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="curator-array")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def cli(verbose: int) -> None:
    """Sharded data-curation pipelines on SLURM job arrays.

    Every array element lists the same source tasks, keeps those whose hash falls in its
    logical shard, runs the pipeline on a private Ray cluster and records a completion
    manifest in the checkpoint directory. `retry` turns missing manifests into the array
    expressions to resubmit.
    """
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def default_sites_dir() -> str:
    return os.environ.get("CURATOR_ARRAY_SITES_DIR", "site_configs")


def checkpoint_option(func):
    return click.option(
        "--checkpoint-path",
        required=True,
        envvar="CHECKPOINT_PATH",
        type=click.Path(file_okay=False),
        help="Checkpoint directory of the logical run (env: CHECKPOINT_PATH).",
    )(func)


@cli.command(epilog=EPILOG_RETRY, context_settings={"ignore_unknown_options": True})
@checkpoint_option
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="array", show_default=True,
              help="array: one array expression per line; fields: "
                   "ARRAY_EXPRESSION SHARD_INDEX_OFFSET MINIMUM_SHARD_INDEX TOTAL_SHARDS.")
@click.option("--max-array-size", default=None,
              help="Split into windows whose array indices stay below this limit "
                   "(offset = shard // M * M); needs --format fields ('auto' with --submit).")
@click.option("--submit", "do_submit", is_flag=True, help="Resubmit the incomplete shards with --site.")
@click.option("--site", help="With --submit: the rendered site_configs/<site>.sbatch to use.")
@click.option("--sites-dir", default=default_sites_dir, show_default="site_configs")
@click.option("--parallel", type=click.IntRange(min=1), help="With --submit: at most K elements at once.")
@click.option("--force", is_flag=True, help="With --submit: resubmit even while elements are still queued.")
@click.option("--dry-run", is_flag=True, help="With --submit: print the sbatch commands instead.")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def retry(checkpoint_path, output_format, max_array_size, do_submit, site, sites_dir, parallel, force, dry_run,
          run_args):
    """Print the logical shards that have no completion manifest (or resubmit them).

    Empty output means every shard is complete. Run it after every submission of the
    run has finished: a shard still running has no manifest yet (--submit checks this).
    """
    from .submit import plan_submissions, queued_shards, resolve_max_array_size

    layout = CheckpointLayout(checkpoint_path)
    plan = plan_retry(layout)
    if not do_submit:
        if site or run_args:
            raise click.UsageError("--site and run options only go with --submit")
        max_size = resolve_max_array_size(max_array_size, os.environ)
        click.echo(format_retry(plan, output_format, max_size), nl=False)
        if plan.complete:
            click.echo(f"all {plan.total_shards} shards are complete", err=True)
        return
    if not site:
        raise click.UsageError("--submit needs --site")
    if plan.complete:
        click.echo(f"all {plan.total_shards} shards are complete; nothing to submit", err=True)
        return
    script = site_script(sites_dir, site)
    queued = queued_shards(layout)
    if queued and not force:
        from .arrays import format_array_expression

        raise CuratorArrayError(
            f"{len(queued)} element(s) of this run are still queued or running (shards "
            f"{format_array_expression(queued)}): wait for them, or pass --force"
        )
    size = resolve_max_array_size(max_array_size, os.environ)
    submissions = plan_submissions(plan.incomplete, plan.total_shards, plan.minimum_shard_index, script, size,
                                   parallel, run_args)
    print_or_submit(submissions, layout, dry_run)


@cli.command(epilog="""\b
Examples:
  curator-array status --checkpoint-path /shared/ckpt
  curator-array status --checkpoint-path /shared/ckpt --json | jq .incomplete
""")
@checkpoint_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def status(checkpoint_path: str, as_json: bool) -> None:
    """Show what is complete, incomplete and failed in a logical run."""
    from .status import collect_status, format_status

    from .submit import queued_shards

    layout = CheckpointLayout(checkpoint_path)
    result = collect_status(layout)
    result.queued = queued_shards(layout)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        click.echo(format_status(result), nl=False)


@cli.command(epilog="""\b
Examples:
  curator-array plan --input-dir /shared/data --total-shards 20
  curator-array plan --input-dir /shared/data --total-shards 20 --files-per-partition 4 --json
""")
@click.option("--input-dir", required=True, envvar="INPUT_DIR", type=click.Path(file_okay=False),
              help="Input directory, listed recursively (env: INPUT_DIR).")
@click.option("--total-shards", required=True, type=click.IntRange(min=1), envvar="TOTAL_SHARDS",
              help="Number of logical shards (env: TOTAL_SHARDS).")
@click.option("--minimum-shard-index", type=click.IntRange(min=0), default=0, show_default=True,
              envvar="MINIMUM_SHARD_INDEX", help="First logical shard (env: MINIMUM_SHARD_INDEX).")
@click.option("--files-per-partition", type=click.IntRange(min=1), default=1, show_default=True,
              envvar="FILES_PER_PARTITION", help="Files grouped into one source task.")
@click.option("--input-file-type", type=click.Choice(["jsonl", "parquet"]), default="jsonl",
              show_default=True, envvar="INPUT_FILE_TYPE")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def plan(input_dir, total_shards, minimum_shard_index, files_per_partition, input_file_type, as_json):
    """Show which logical shard each source task would go to, before submitting."""
    from .plan import format_plan, plan_shards
    from .stages.partition import FilePartitioningStage

    source = FilePartitioningStage(input_dir, input_file_type, files_per_partition)
    listing = [(t.task_id, t.metadata["relative_files"]) for t in source.list_tasks()]
    result = plan_shards(listing, total_shards, minimum_shard_index)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(format_plan(result), nl=False)


RUN_EPILOG = """\b
Examples:
  curator-array run --input-dir data/ --output-dir out/
  curator-array run --input-dir data/ --output-dir out/ --output-file-type parquet \\
      --drop-empty --min-words 5 --dedup
  NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX=3 NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS=20 \\
      curator-array run --input-dir data/ --output-dir out/
  curator-array run --pipeline curator_array.examples.quality:build_pipeline \\
      --input-dir data/ --output-dir out/

\b
Exit codes: 0 shard complete (or already complete), 3 FailedTasks recorded
(see the attempt's failed_tasks.json), 2 configuration error, 1 crash.
"""


@cli.command(epilog=RUN_EPILOG)
@click.option("--input-dir", envvar="INPUT_DIR", type=click.Path(file_okay=False),
              help="Input directory (env: INPUT_DIR); not needed with --input-urls.")
@click.option("--output-dir", required=True, envvar="OUTPUT_DIR", type=click.Path(file_okay=False),
              help="Output directory (env: OUTPUT_DIR).")
@click.option("--checkpoint-path", envvar="CHECKPOINT_PATH", type=click.Path(file_okay=False),
              help="Checkpoint directory (env: CHECKPOINT_PATH; default: the output dir).")
@click.option("--input-urls", multiple=True, envvar="INPUT_URLS", type=click.Path(exists=True),
              help="URL list(s) to download first: one URL per line or JSONL with a 'url' field "
                   "(optional 'sha256', 'size'); a file or a directory, repeatable. INPUT_DIR is "
                   "then ignored.")
@click.option("--download-dir", envvar="DOWNLOAD_DIR", type=click.Path(file_okay=False),
              help="Where downloads go (shared or node-local; default OUTPUT_DIR/.downloads).")
@click.option("--download-workers-per-node", type=click.FloatRange(min=0, min_open=True),
              default=2, show_default=True, envvar="DOWNLOAD_WORKERS_PER_NODE",
              help="Concurrent downloads per node (pool = this x alive nodes).")
@click.option("--download-retries", type=click.IntRange(min=0), default=5, show_default=True,
              help="Further attempts per URL after the first.")
@click.option("--download-timeout", type=click.FloatRange(min=0.1), default=60, show_default=True,
              help="Seconds without data before a download attempt is abandoned.")
@click.option("--input-file-type", type=click.Choice(["jsonl", "parquet"]), default="jsonl",
              show_default=True, envvar="INPUT_FILE_TYPE")
@click.option("--output-file-type", type=click.Choice(["jsonl", "parquet"]), default="jsonl",
              show_default=True, envvar="OUTPUT_FILE_TYPE")
@click.option("--files-per-partition", type=click.IntRange(min=1), default=1, show_default=True,
              envvar="FILES_PER_PARTITION", help="Input files per source task.")
@click.option("--pipeline", "pipeline_ref", envvar="CURATOR_PIPELINE", metavar="MODULE:FUNCTION",
              help="A function building the stage list (default: read, filters, write).")
@click.option("--text-field", default="text", show_default=True, help="Field the filters look at.")
@click.option("--drop-empty", is_flag=True, help="Drop documents with empty or missing text.")
@click.option("--min-words", type=click.IntRange(min=0), help="Drop documents with fewer words.")
@click.option("--max-words", type=click.IntRange(min=0), help="Drop documents with more words.")
@click.option("--dedup", is_flag=True, help="Drop exact duplicate texts within each source task.")
@click.option("--malformed", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              envvar="MALFORMED_RECORDS",
              help="Malformed JSONL lines: fail the task, or skip and count them.")
@click.option("--force", is_flag=True, help="Rerun a shard even if its manifest exists.")
@click.option("--ray-address", envvar="RAY_ADDRESS",
              help="Use this running Ray cluster instead of starting one (never stopped).")
@click.option("--num-cpus", type=click.IntRange(min=1), help="CPUs for the private Ray node.")
@click.option("--object-store-memory", type=click.IntRange(min=1), help="Object store bytes.")
@click.option("--ray-temp-dir", envvar="CURATOR_ARRAY_RAY_TMPDIR", type=click.Path(file_okay=False),
              help="Parent of Ray's session dir (default: TMPDIR); keep it short.")
@click.option("--stall-timeout", type=click.FloatRange(min=1), envvar="CURATOR_ARRAY_STALL_TIMEOUT",
              help="Fail when no operator progresses for this many seconds.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal).")
@click.option("--cluster", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="local: a private Ray head on this node; slurm: one Ray cluster over the job's "
                   "nodes (every node runs this command; node 0 drives). The entrypoint chooses.")
@click.option("--rendezvous-dir", envvar="CURATOR_ARRAY_RENDEZVOUS_DIR", type=click.Path(file_okay=False),
              help="Shared directory where the nodes of a multi-node job meet "
                   "(default: under the checkpoint's metadata dir).")
@click.option("--worker-join-timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              envvar="CURATOR_ARRAY_WORKER_JOIN_TIMEOUT", help="Seconds the head waits for every node.")
@click.option("--node-ip", envvar="CURATOR_ARRAY_NODE_IP",
              help="Address other nodes reach this one at (default: the default route's interface).")
def run(**kwargs) -> None:
    """Run this process's logical shard of the pipeline.

    The shard comes from NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX / _TOTAL_SHARDS /
    _MINIMUM_SHARD_INDEX (falling back to SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT);
    without them every task runs as one implicit shard. A completion manifest is written
    only when every task succeeded. SIGUSR1 (what `#SBATCH --signal` sends) and SIGTERM
    stop the shard cleanly, without a manifest (exit 4).
    """
    from .app import RunRequest, run_shard_command

    if not kwargs["input_dir"] and not kwargs["input_urls"]:
        raise click.UsageError("give --input-dir (or INPUT_DIR), or --input-urls")
    logging.getLogger("curator_array").setLevel(logging.INFO)
    install_stop_handlers()
    raise click.exceptions.Exit(run_shard_command(RunRequest.from_flags(kwargs), os.environ))


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
    from pathlib import Path

    from .sites import load_site, render_site as render, site_names, write_rendered

    directory = Path(sites_dir)
    chosen = site_names(directory) if render_all else list(names)
    if not chosen:
        raise click.UsageError("name a site, or pass --all")
    stale = []
    for name in chosen:
        if check:
            text = render(load_site(directory / f"{name}.toml"), directory / "templates")
            target = directory / f"{name}.sbatch"
            if not target.exists() or target.read_text() != text:
                stale.append(name)
            continue
        path, changed = write_rendered(directory, name)
        click.echo(f"{path}: {'written' if changed else 'up to date'}")
    if stale:
        raise CuratorArrayError(f"stale rendered site scripts: {', '.join(stale)}; run `curator-array render-site --all`")


def site_script(sites_dir: str, site: str) -> str:
    path = os.path.join(sites_dir, f"{site}.sbatch")
    if not os.path.isfile(path):
        raise ConfigError(f"no rendered script {path}: run `curator-array render-site {site}` first")
    return path


def submission_checkpoint(checkpoint_path: str | None) -> CheckpointLayout:
    path = checkpoint_path or os.environ.get("OUTPUT_DIR")
    if not path:
        raise ConfigError("set CHECKPOINT_PATH (or OUTPUT_DIR), where the run records its progress")
    return CheckpointLayout(path)


def print_or_submit(submissions, layout: CheckpointLayout, dry_run: bool) -> None:
    from .submit import submit_all

    if dry_run:
        for item in submissions:
            click.echo(item.command_line())
        return
    for job_id, item in zip(submit_all(submissions, layout, os.environ), submissions):
        click.echo(f"{job_id}  --array={item.array_expression}  SHARD_INDEX_OFFSET={item.offset}")


@cli.command(context_settings={"ignore_unknown_options": True}, epilog="""\b
Examples (INPUT_DIR and OUTPUT_DIR set in your shell, as for sbatch):
  curator-array submit --site example-pyxis --total-shards 20
  curator-array submit --site local --total-shards 10000 --max-array-size auto --parallel 50
  curator-array submit --site local --total-shards 6 --dry-run -- --drop-empty --min-words 5
""")
@click.option("--site", required=True, help="A rendered site_configs/<site>.sbatch.")
@click.option("--total-shards", required=True, type=click.IntRange(min=1), help="Logical shards of the run.")
@click.option("--minimum-shard-index", type=click.IntRange(min=0), default=0, show_default=True,
              envvar="MINIMUM_SHARD_INDEX")
@click.option("--array", "array_expression", help="Only these logical shards (default: all).")
@click.option("--max-array-size", help="'auto' (scontrol show config) or a number: windows with offsets.")
@click.option("--parallel", type=click.IntRange(min=1), help="At most this many elements running at once (%K).")
@click.option("--checkpoint-path", envvar="CHECKPOINT_PATH", help="Default: OUTPUT_DIR.")
@click.option("--sites-dir", default=default_sites_dir, show_default="site_configs")
@click.option("--dry-run", is_flag=True, help="Print the exact sbatch commands instead.")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def submit(site, total_shards, minimum_shard_index, array_expression, max_array_size, parallel, checkpoint_path,
           sites_dir, dry_run, run_args):
    """Submit a logical run as sbatch --array windows of a site's script."""
    from .arrays import parse_array_expression
    from .submit import plan_submissions, resolve_max_array_size

    script = site_script(sites_dir, site)
    layout = submission_checkpoint(checkpoint_path)
    if layout.run_file.exists():
        from .checkpoint import read_run_config

        run = read_run_config(layout)
        if (run.total_shards, run.minimum_shard_index) != (total_shards, minimum_shard_index):
            raise ConfigError(
                f"{layout.root} belongs to a run with total_shards={run.total_shards}, "
                f"minimum_shard_index={run.minimum_shard_index}: use those, or a new checkpoint path"
            )
    shards = parse_array_expression(array_expression) if array_expression else list(
        range(minimum_shard_index, minimum_shard_index + total_shards))
    size = resolve_max_array_size(max_array_size, os.environ)
    submissions = plan_submissions(shards, total_shards, minimum_shard_index, script, size, parallel, run_args)
    print_or_submit(submissions, layout, dry_run)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry: run the CLI and map every failure to one line and an exit code."""
    debug = os.environ.get("CURATOR_ARRAY_DEBUG", "") not in ("", "0")
    try:
        # Without standalone mode click returns (not raises) the code of a command's Exit.
        result = cli.main(args=argv, prog_name="curator-array", standalone_mode=False)
        if isinstance(result, int):
            return result
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("curator-array: aborted", err=True)
        return 1
    except click.UsageError as exc:
        command = f" {exc.ctx.command_path.split(' ', 1)[1]}" if exc.ctx and " " in exc.ctx.command_path else ""
        click.echo(f"curator-array: error: {exc.format_message()} (see curator-array{command} --help)", err=True)
        return 2
    except (CuratorArrayError, ShardStopped) as exc:
        if debug:
            raise
        click.echo(f"curator-array: error: {exc}", err=True)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the last line of defence prints one line
        if debug:
            raise
        click.echo(
            f"curator-array: error: unexpected {type(exc).__name__}: {exc} "
            "(set CURATOR_ARRAY_DEBUG=1 for a traceback)",
            err=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

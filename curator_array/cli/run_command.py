"""``curator-array run``: one logical shard, and the parsing of run options for others.

``submit`` and ``retry --submit`` take run options after ``--``; they parse them here too
(:func:`parse_run_args`), with the same rules as the elements.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import click
from click.core import ParameterSource

from .group import OptionTableCommand, cli

RUN_EPILOG = """\b
Examples:
  curator-array run --input-dir data/ --output-dir out/
  curator-array run --input-dir data/ --output-dir out/ --output-file-type parquet \\
      --drop-empty --min-words 5 --dedup fuzzy
  NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX=3 NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS=20 \\
      curator-array run --input-dir data/ --output-dir out/
  curator-array run --pipeline curator_array.examples.quality:build_pipeline \\
      --input-dir data/ --output-dir out/

\b
Exit codes: 0 shard complete (or already complete), 3 FailedTasks recorded
(see the attempt's failed_tasks.json), 4 stopped by a signal, 2 configuration
error (a different pipeline than the run's included), 1 crash.
"""


@cli.command(cls=OptionTableCommand, epilog=RUN_EPILOG)
@click.pass_context
def run(ctx: click.Context, **kwargs) -> None:
    """Run this process's logical shard of the pipeline.

    The shard comes from NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX / _TOTAL_SHARDS /
    _MINIMUM_SHARD_INDEX, or from SLURM_ARRAY_TASK_ID + SHARD_INDEX_OFFSET of TOTAL_SHARDS
    (default SLURM_ARRAY_TASK_COUNT); without them every task runs as one implicit shard.
    Each option's value comes from its flag, else its variable, else its default.
    A completion manifest is written only when every task succeeded. SIGUSR1 (what
    `#SBATCH --signal` sends), SIGTERM and SIGINT (Ctrl-C) stop the shard cleanly, without a
    manifest (exit 4); a rerun resumes it.
    """
    from ..run.precedence import options_for_start, request_of

    _run_request(ctx, request_of(options_for_start(given_flags(ctx), os.environ)))


SELECT_EPILOG = """\b
Examples:
  curator-array run --input-dir data/ --output-dir tagged/ --annotate --min-words 50 --drop-empty
  curator-array select --select-from tagged/ --output-dir kept/ --where "would_drop IS NULL"
  curator-array select --select-from tagged/ --output-dir long/ \\
      --where "would_drop IS NULL OR would_drop = 'word_count'" --output-file-type parquet

\b
Exit codes as for run.
"""


@cli.command(cls=OptionTableCommand, epilog=SELECT_EPILOG)
@click.pass_context
def select(ctx: click.Context, **kwargs) -> None:
    """Select from a finished run's output without computing it again: `run` with --select-from.

    The run selected from is usually an annotated one (`run --annotate`): every document a
    rule would drop is kept and marked (would_drop, would_drop_all) beside its scores, so a
    selection is a --where expression over those columns (SQL, DuckDB's dialect), and any
    output option (format, file size, --tokenize). It is sharded, retried and pinned as any
    run; submit it with `submit ... -- --select-from DIR --where ...`.
    """
    from ..run.precedence import options_for_start, request_of

    chosen = options_for_start(given_flags(ctx), os.environ)
    if not chosen["select_from"].value:
        raise click.UsageError("select needs --select-from (or SELECT_FROM): the output dir of a finished run")
    _run_request(ctx, request_of(chosen))


def _run_request(ctx: click.Context, request) -> None:
    """Run this process's element of ``request``; exits with its code."""
    from ..execution.quiet_stderr import quiet_stderr
    from ..run import startup_log, supervisor
    from ..run.element import number_this_node, run_element_command
    from ..run.stopping import StopController
    from ..slurm.job_context import JobContext
    from ..slurm.jobenv import JobEnvironment

    logging.getLogger("curator_array").setLevel(logging.INFO)
    context = number_this_node(request, ctx.obj or JobContext.from_env(os.environ))
    # This process's own environment decides, not a context handed in (a test's SLURM
    # context in-process must never fork the test runner).
    if supervisor.wanted(os.environ, JobEnvironment.from_env(os.environ).in_slurm) and context.job.is_driver:
        parent = supervisor.fork_driver()
        if parent is not None:
            raise click.exceptions.Exit(parent.wait())
    stop = StopController().install()
    startup_log.hold()
    try:
        with stop.surfacing(), quiet_stderr():
            code = run_element_command(request, context, stop=stop)
        startup_log.release()
    except BaseException:
        startup_log.discard()
        raise
    finally:
        stop.uninstall()
    raise click.exceptions.Exit(code)


def given_flags(ctx: click.Context) -> dict[str, Any]:
    """The run options given on this command line (not their defaults)."""
    return {name: value for name, value in ctx.params.items()
            if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE}


def parse_run_args(args: Sequence[str]) -> dict[str, Any]:
    """The run options in ``args``, as ``curator-array run ARGS`` would parse them (flags only)."""
    with run.make_context("run", list(args), parent=click.get_current_context(silent=True)) as ctx:
        return given_flags(ctx)

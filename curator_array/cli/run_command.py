"""``curator-array run``: one logical shard, and the parsing of run options for others.

``submit`` and ``retry --submit`` pass run options through to the job script; they parse
them here too (:func:`run_request_from_args`), so the pipeline they check against the
run contract is exactly the one the array elements will build.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import click

from ..run.options import RUN_OPTIONS
from ..slurm.job_context import TRUE_WORDS
from .group import cli, run_option

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
(see the attempt's failed_tasks.json), 4 stopped by a signal, 2 configuration
error (a different pipeline than the run's included), 1 crash.
"""


def run_options(func):
    """Every option of the option table, in its order."""
    for option in reversed(RUN_OPTIONS):
        func = run_option(option.name)(func)
    return func


@cli.command(epilog=RUN_EPILOG)
@run_options
@click.pass_obj
def run(context, **kwargs) -> None:
    """Run this process's logical shard of the pipeline.

    The shard comes from NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX / _TOTAL_SHARDS /
    _MINIMUM_SHARD_INDEX, or from SLURM_ARRAY_TASK_ID + SHARD_INDEX_OFFSET of TOTAL_SHARDS
    (default SLURM_ARRAY_TASK_COUNT); without them every task runs as one implicit shard.
    A completion manifest is written only when every task succeeded. SIGUSR1 (what
    `#SBATCH --signal` sends) and SIGTERM stop the shard cleanly, without a manifest (exit 4).
    """
    from ..run.request import RunRequest
    from ..run.shard import run_shard_command
    from ..run.stopping import StopController
    from ..slurm.job_context import JobContext

    if not kwargs["input_dir"] and not kwargs["input_urls"]:
        raise click.UsageError("give --input-dir (or INPUT_DIR), or --input-urls")
    context = context or JobContext.from_env(os.environ)
    logging.getLogger("curator_array").setLevel(logging.INFO)
    stop = StopController().install()
    try:
        code = run_shard_command(RunRequest.from_flags(kwargs), context, stop=stop)
    finally:
        stop.uninstall()
    raise click.exceptions.Exit(code)


def options_from_env(env: Mapping[str, str]) -> list[str]:
    """``--option value`` for every run option whose variable ``env`` sets."""
    args: list[str] = []
    for option in RUN_OPTIONS:
        if option.variable is None or option.variable not in env:
            continue
        value = env[option.variable]
        if option.kind == "flag":
            if value.strip().lower() in TRUE_WORDS:
                args.append(option.flag)
        else:
            args += [option.flag, value]
    return args


def run_request_from_args(args: Sequence[str], overrides: Mapping[str, str] | None = None):
    """The ``RunRequest`` that ``curator-array run ARGS`` would build here.

    ``overrides`` are variables a job script sets itself (a site's ``[env]``): they beat
    the caller's environment, and command-line arguments beat them, as in the job.
    """
    from ..run.request import RunRequest

    full = [*options_from_env(overrides or {}), *args]
    with run.make_context("run", full, parent=click.get_current_context(silent=True)) as ctx:
        params = dict(ctx.params)
    if not params["input_dir"] and not params["input_urls"]:
        raise click.UsageError("give --input-dir (or INPUT_DIR), or --input-urls")
    return RunRequest.from_flags(params)

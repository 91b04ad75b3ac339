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

from . import FormatChoice, cli

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
@click.option("--input-file-type", type=FormatChoice("input"), default="jsonl",
              show_default=True, envvar="INPUT_FILE_TYPE")
@click.option("--output-file-type", type=FormatChoice("output"), default=None, envvar="OUTPUT_FILE_TYPE",
              help="Default: jsonl (parquet for --pipeline commoncrawl).")
@click.option("--files-per-partition", type=click.IntRange(min=1), default=1, show_default=True,
              envvar="FILES_PER_PARTITION", help="Input files per source task.")
@click.option("--pipeline", "pipeline_ref", envvar="CURATOR_PIPELINE", metavar="NAME|MODULE:FUNCTION",
              help="A built-in pipeline (commoncrawl: WARC → text → language → quality → Parquet) or a "
                   "function building the stage list (default: read, filters, write).")
@click.option("--text-field", default="text", show_default=True, help="Field the filters look at.")
@click.option("--drop-empty", is_flag=True, help="Drop documents with empty or missing text.")
@click.option("--min-words", type=click.IntRange(min=0), help="Drop documents with fewer words.")
@click.option("--max-words", type=click.IntRange(min=0), help="Drop documents with more words.")
@click.option("--dedup", is_flag=True, help="Drop exact duplicate texts within each source task.")
@click.option("--malformed", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              envvar="MALFORMED_RECORDS",
              help="Malformed JSONL lines: fail the task, or skip and count them.")
@click.option("--languages", envvar="LANGUAGES", callback=lambda ctx, param, value: tuple(
                  code.strip() for code in (value or "").split(",") if code.strip()),
              help="commoncrawl: keep documents in these languages, e.g. en,de,ja (default: all).")
@click.option("--min-language-score", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              envvar="MIN_LANGUAGE_SCORE", help="commoncrawl: drop documents whose language score is lower.")
@click.option("--extractor", type=click.Choice(["resiliparse", "trafilatura"]), default="resiliparse",
              show_default=True, envvar="HTML_EXTRACTOR", help="commoncrawl: HTML → main text extractor.")
@click.option("--records-per-batch", type=click.IntRange(min=1), default=256, show_default=True,
              help="WARC input: records per part (a reader's memory grows with this, not the file).")
@click.option("--force", is_flag=True, help="Rerun a shard even if its manifest exists.")
@click.option("--relist", is_flag=True,
              help="Walk the input tree anyway and refuse any difference from the run's frozen listing "
                   "(elements otherwise read the frozen listing and check only their own files).")
@click.option("--new-run", is_flag=True,
              help="If the checkpoint holds a run with another pipeline, shard range or input listing, "
                   "archive its records and start a new logical run (outside arrays; arrays use "
                   "`submit --new-run`).")
@click.option("--ray-address", envvar="RAY_ADDRESS",
              help="Use this running Ray cluster instead of starting one (never stopped).")
@click.option("--num-cpus", type=click.IntRange(min=1), help="CPUs for the private Ray node.")
@click.option("--object-store-memory", type=click.IntRange(min=1), help="Object store bytes.")
@click.option("--ray-temp-dir", envvar="CURATOR_ARRAY_RAY_TMPDIR", type=click.Path(file_okay=False),
              help="Parent of Ray's session dir (default: TMPDIR); keep it short.")
@click.option("--stall-timeout", type=click.FloatRange(min=1), envvar="CURATOR_ARRAY_STALL_TIMEOUT",
              help="Fail when no operator progresses for this many seconds.")
@click.option("--progress/--no-progress", default=None, help="Ray Data's progress bars (default: on a terminal).")
@click.option("--progress-interval", type=click.FloatRange(min=0), default=30, show_default=True,
              envvar="CURATOR_ARRAY_PROGRESS_INTERVAL",
              help="Seconds between progress lines in the log (tasks, rows/s, MB/s, ETA); 0: none.")
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
@click.pass_obj
def run(context, **kwargs) -> None:
    """Run this process's logical shard of the pipeline.

    The shard comes from NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX / _TOTAL_SHARDS /
    _MINIMUM_SHARD_INDEX, or from SLURM_ARRAY_TASK_ID + SHARD_INDEX_OFFSET of TOTAL_SHARDS
    (default SLURM_ARRAY_TASK_COUNT); without them every task runs as one implicit shard.
    A completion manifest is written only when every task succeeded. SIGUSR1 (what
    `#SBATCH --signal` sends) and SIGTERM stop the shard cleanly, without a manifest (exit 4).
    """
    from ..app import RunRequest, run_shard_command
    from ..job_context import JobContext
    from ..stopping import StopController

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
    for param in run.params:
        if not isinstance(param, click.Option) or not param.envvar or param.envvar not in env:
            continue
        value = env[param.envvar]
        if param.is_flag:
            if value.strip().lower() in ("1", "true", "yes", "on"):
                args.append(param.opts[0])
        else:
            args += [param.opts[0], value]
    return args


def run_request_from_args(args: Sequence[str], overrides: Mapping[str, str] | None = None):
    """The ``RunRequest`` that ``curator-array run ARGS`` would build here.

    ``overrides`` are variables a job script sets itself (a site's ``[env]``): they beat
    the caller's environment, and command-line arguments beat them, as in the job.
    """
    from ..app import RunRequest

    full = [*options_from_env(overrides or {}), *args]
    with run.make_context("run", full, parent=click.get_current_context(silent=True)) as ctx:
        params = dict(ctx.params)
    if not params["input_dir"] and not params["input_urls"]:
        raise click.UsageError("give --input-dir (or INPUT_DIR), or --input-urls")
    return RunRequest.from_flags(params)

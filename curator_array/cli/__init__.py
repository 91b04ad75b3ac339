"""The ``curator-array`` command line.

Errors the user can act on are printed as one line on stderr (no traceback); exit code 2
means a usage or configuration error, 1 any other failure. Set CURATOR_ARRAY_DEBUG=1 to
see tracebacks. The commands live in small modules next to this one: ``run_command``
(run one shard), ``inspect_commands`` (plan, status), ``submit_commands`` (submit, retry,
render-site).
"""

from __future__ import annotations

import logging
import os

import click

from .. import __version__
from ..errors import CuratorArrayError
from ..stopping import ShardStopped


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


class FormatChoice(click.ParamType):
    """A file format of the registry, listed in --help but looked up only when a pipeline is
    built: importing the formats imports pyarrow, which a run can do while its Ray head boots."""

    name = "format"

    def __init__(self, role: str):
        self.role = role

    def get_metavar(self, param, ctx=None) -> str:
        from ..formats import input_formats, output_formats

        return "[" + "|".join(input_formats() if self.role == "input" else output_formats()) + "]"


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


def main(argv: list[str] | None = None, context=None) -> int:
    """Console-script entry: run the CLI and map every failure to one line and an exit code.

    ``context`` is a ``JobContext`` the caller already resolved (the entrypoint does); the
    ``run`` command then uses it instead of resolving the environment again.
    """
    debug = os.environ.get("CURATOR_ARRAY_DEBUG", "") not in ("", "0")
    try:
        # Without standalone mode click returns (not raises) the code of a command's Exit.
        result = cli.main(args=argv, prog_name="curator-array", standalone_mode=False, obj=context)
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


from . import inspect_commands, run_command, submit_commands  # noqa: E402,F401  (register the commands)

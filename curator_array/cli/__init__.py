"""The ``curator-array`` command line, and the container entrypoint (``entrypoint``).

Errors the user can act on are printed as one line on stderr (no traceback); exit code 2
means a usage or configuration error, 1 any other failure. Set CURATOR_ARRAY_DEBUG=1 to
see tracebacks. The group is ``group.cli``; the commands live in small modules next to
it: ``run_command`` (run one shard), ``inspect_commands`` (plan, status, report),
``submit_commands`` (submit, retry, render-site), ``model_commands`` (train-classifier).

May import: core, slurm, stages, formats, pipelines, execution, report, run, classify.
"""

from __future__ import annotations

import os
from typing import NoReturn

import click

from ..core.errors import CuratorArrayError
from ..run.stopping import ShardStopped, stop_message
from . import inspect_commands, model_commands, run_command, submit_commands  # noqa: F401  (each registers its commands)
from .group import cli
from .process_exit import exit_process


def _command(argv: list[str] | None) -> str | None:
    import sys

    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    return words[0] if words else None


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
    except click.exceptions.Abort:  # Ctrl-C outside a run's stop handlers (a run installs them first thing)
        click.echo(f"curator-array: {stop_message('SIGINT') if _command(argv) == 'run' else 'interrupted (SIGINT)'}",
                   err=True)
        return ShardStopped.exit_code
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


def console() -> NoReturn:
    """The ``curator-array`` console script: ``main``, then the process ends (``process_exit``)."""
    exit_process(main())

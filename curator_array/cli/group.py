"""The ``curator-array`` click group and what its commands share: options built from the
run's option table (``run.option_table``), the checkpoint option, the sites directory."""

from __future__ import annotations

import logging
import os

import click

from .. import __version__
from ..core.options import RunOption
from ..run.option_table import option_named, run_options

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
    logging.basicConfig(level=level, format=LOG_FORMAT)


def run_option(name: str, required: bool = False, from_environment: bool = False, **overrides):
    """The click option decorator for the run option ``name``, as the option table defines it.

    ``run`` reads the options' variables itself (``run.precedence``); other commands that
    take one of these options let click read its variable (``from_environment``).
    """
    return click_option(option_named(name), required, from_environment, **overrides)


def click_option(option: RunOption, required: bool = False, from_environment: bool = False, **overrides):
    """The click option decorator of ``option``: what its kind tells click (``core.option_kinds``)."""
    help_text = f"{option.help} (env: {option.variable})"
    flag = f"{option.flag}/--no-{option.flag[2:]}" if option.behaviour.negatable else option.flag
    kwargs = {
        "help": help_text,
        "required": required,
        "metavar": option.metavar,
        "envvar": option.variable if from_environment else None,
        **option.behaviour.click_settings(option, click),
    }
    if option.default_text and "show_default" not in kwargs:
        kwargs.update(show_default=option.default_text)
    kwargs.update(overrides)
    destination = [option.name] if option.flag[2:].replace("-", "_") != option.name else []
    return click.option(flag, *destination, **{k: v for k, v in kwargs.items() if v is not None or k == "default"})


class OptionTableCommand(click.Command):
    """A command whose options are the option table's as it is when the command runs, so an
    option a filter or a phase registered after import brings is there too."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        def holder():
            pass

        for option in run_options():  # each decorator appends its option: in the table's order
            holder = click_option(option)(holder)
        return [*holder.__click_params__, *super().get_params(ctx)]


def checkpoint_option(func):
    """``--checkpoint-path`` of the commands that read a run (required there)."""
    return run_option("checkpoint_path", required=True, from_environment=True,
                      help="Checkpoint directory of the logical run (env: CHECKPOINT_PATH).")(func)


def default_sites_dir() -> str:
    return os.environ.get("CURATOR_ARRAY_SITES_DIR", "site_configs")

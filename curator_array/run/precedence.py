"""Which value each run option takes for one start, and where it came from.

One function, ``resolve``, walks the option table once over an ordered list of sources
and takes each option's first value found. The orders:

* a start of ``run``: its flags, then the environment (a variable a site's ``[env]`` set
  counts as the site's), then the default;
* ``submit``: its run flags, the site's ``[env]``, the environment, the default;
* an element queued by ``submit`` (``--request ID``): the request pinned in the checkpoint
  for every run option, its own flags and variables for the start options; a flag that
  contradicts the pinned request is refused, a variable that does is reported and ignored;
* ``retry --submit``: its flags, the run's latest pinned request, the default.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import ConfigError
from ..core.layout import CheckpointLayout
from ..core.options import RunOption
from ..core.records.run import OptionValue, PinnedRequest
from ..pipelines.options import DOWNLOADS_DIR
from ..slurm.sites import SITE_ENV_VARIABLE
from ..storage.places import place_of
from ..storage.s3 import is_s3
from .option_table import run_options
from .phases import PHASES
from .request import RunRequest

logger = logging.getLogger(__name__)

FLAG, SITE, ENVIRONMENT, DEFAULT = "flag", "site [env]", "environment", "default"
RUN, START = "run", "start"

OptionValues = dict[str, OptionValue]
_WARNED: set = set()  # old variable names, and unused options, already warned about in this process


@dataclass(frozen=True)
class Flags:
    """Options given on a command line, already typed."""

    values: Mapping[str, Any]

    def value_of(self, option: RunOption) -> OptionValue | None:
        if option.name not in self.values:
            return None
        return OptionValue(option.with_absolute_paths(self.values[option.name]), FLAG)


@dataclass(frozen=True)
class Variables:
    """Variables of an environment or a site's ``[env]``, read with each option's own rules
    (set but empty counts as unset); a bad value names the variable and where it came from.
    ``site_names`` are variables that a site's ``[env]`` put in the environment."""

    values: Mapping[str, str]
    label: str = ENVIRONMENT
    site_names: frozenset[str] = frozenset()

    @classmethod
    def of_environment(cls, environment: Mapping[str, str]) -> Variables:
        names = frozenset(n for n in environment.get(SITE_ENV_VARIABLE, "").split(",") if n)
        return cls(environment, ENVIRONMENT, names)

    def value_of(self, option: RunOption) -> OptionValue | None:
        variable = next((name for name in (option.variable, *option.old_variables)
                         if str(self.values.get(name, "")).strip()), None)
        if variable is None:
            return None
        if variable != option.variable and variable not in _WARNED:
            _WARNED.add(variable)
            logger.warning("%s is the old name of %s (the flag %s in capitals): still read, but rename it",
                           variable, option.variable, option.flag)
        raw = str(self.values[variable])
        label = SITE if variable in self.site_names else self.label
        try:
            return OptionValue(option.parse(raw), label)
        except ValueError as problem:
            where = "the environment" if label == ENVIRONMENT else label
            raise ConfigError(f"{variable}={raw!r} from {where}: {problem}") from None


@dataclass(frozen=True)
class Pinned:
    """The run options of a pinned request (never its start options). For an element, an
    unset checkpoint path is the run's output dir, as it was for the run."""

    request: PinnedRequest
    checkpoint_is_output: bool = False

    def value_of(self, option: RunOption) -> OptionValue | None:
        found = self.request.options.get(option.name)
        if option.scope == RUN and found is None and option.before_it_existed is not None:
            return OptionValue(option.before_it_existed, "pinned before the option existed")
        if option.scope != RUN or found is None:
            return None
        if self.checkpoint_is_output and option.name == "checkpoint_path" and found.value is None:
            return OptionValue(self.request.options["output_dir"].value, found.source)
        return found


class Defaults:
    def value_of(self, option: RunOption) -> OptionValue:
        return OptionValue(option.default, DEFAULT)


def resolve(sources: Sequence[Flags | Variables | Pinned | Defaults]) -> OptionValues:
    """Every option's value from the first source that has one (end the list with ``Defaults``)."""
    chosen: OptionValues = {}
    for option in run_options():
        chosen[option.name] = next(found for source in sources if (found := source.value_of(option)) is not None)
    return chosen


def own_sources(flags: Mapping[str, Any], environment: Mapping[str, str], site_env: Mapping[str, str] | None = None,
                site_label: str = SITE) -> list:
    """What a start or a submission is given itself: flags, a site's ``[env]``, the environment, defaults."""
    site = [Variables({k: str(v) for k, v in site_env.items()}, site_label)] if site_env else []
    return [Flags(flags), *site, Variables.of_environment(environment), Defaults()]


def refuse_unused(chosen: OptionValues) -> OptionValues:
    """An option the chosen pipeline does not use: refused when given as a flag (it would
    change nothing), one warning when it comes from a variable (a site may set it for all)."""
    from .option_table import DEFAULT_PIPELINE, unused_options

    pipeline, unused = unused_options(chosen["pipeline_ref"].value,
                                      {name for name, value in chosen.items() if value.source != DEFAULT})
    shown = "the default pipeline" if pipeline == DEFAULT_PIPELINE else f"--pipeline {pipeline}"
    for option in unused:
        given = chosen[option.name]
        users = ", ".join("the default pipeline" if p == DEFAULT_PIPELINE else p for p in option.pipelines)
        message = f"{option.flag} does nothing with {shown} (it is for {users})"
        if given.source == FLAG:
            raise ConfigError(f"{message}: leave it out")
        if (option.name, pipeline) not in _WARNED:
            _WARNED.add((option.name, pipeline))
            logger.warning("%s=%s from %s: %s; ignored", option.variable, option.show(given.value), given.source,
                           message)
    return chosen


def for_pipeline(chosen: OptionValues) -> OptionValues:
    """``chosen`` as the chosen pipeline takes them: options it does not use refused
    (``refuse_unused``), and the values a built-in pipeline gives options left at their
    defaults: an option's own (``RunOption.pipeline_defaults``), and its quality threshold
    (``PIPELINE_QUALITY_THRESHOLDS``; ``--pipeline dclm``: DCLM-Baseline's) for each
    ``--quality-model`` when no ``--quality-threshold`` is given."""
    from ..core.options import split_named
    from ..stages.defaults import PIPELINE_QUALITY_THRESHOLDS

    chosen = refuse_unused(chosen)
    pipeline = chosen["pipeline_ref"].value
    annotated = bool(chosen["annotate"].value)  # no phases after the first: its selection has them
    for option in run_options():
        by_pipeline = dict(option.pipeline_defaults)
        if chosen[option.name].source == DEFAULT and pipeline in by_pipeline and not annotated:
            chosen = {**chosen, option.name: OptionValue(by_pipeline[pipeline], f"--pipeline {pipeline}")}
    models, thresholds = chosen["quality_model"].value or (), chosen["quality_threshold"]
    threshold = PIPELINE_QUALITY_THRESHOLDS.get(pipeline)
    if threshold is None or not models or thresholds.source != DEFAULT:
        return chosen
    names = [split_named(model)[0] for model in models]
    return {**chosen, "quality_threshold": OptionValue(tuple(f"{name}={threshold}" for name in names),
                                                       f"--pipeline {pipeline}")}


def options_for_start(flags: Mapping[str, Any], environment: Mapping[str, str]) -> OptionValues:
    """What this start runs: its own flags and variables, or, with ``--request``, the pinned request."""
    sources = own_sources(flags, environment)
    own = resolve(sources)
    request_id = own["request"].value
    if not request_id:
        return for_pipeline(own)
    checkpoint = own["checkpoint_path"].value or own["output_dir"].value
    if not checkpoint:
        raise ConfigError("--request needs the run's checkpoint: give --checkpoint-path (or CHECKPOINT_PATH)")
    pinned = PinnedRequest.read(CheckpointLayout(checkpoint), request_id)
    chosen = resolve([Pinned(pinned, checkpoint_is_output=True), *sources])
    _refuse_contradictions(own, chosen)
    return chosen


def _refuse_contradictions(own: OptionValues, pinned: OptionValues) -> None:
    """A flag that contradicts the pinned request is an error; a variable is reported and ignored."""
    ignored = []
    for option in run_options():
        mine, theirs = own[option.name], pinned[option.name]
        if option.scope == START or mine.source == DEFAULT or mine.value == theirs.value:
            continue
        if mine.source == FLAG:
            raise ConfigError(
                f"{option.flag} {option.show(mine.value)!r} differs from the request this element was "
                f"queued with ({option.show(theirs.value)!r}, from {theirs.source} at submit): drop the flag, "
                "or submit again with it"
            )
        ignored.append(f"{option.variable}={option.show(mine.value)} (the request has {option.show(theirs.value)!r})")
    if ignored:
        logger.warning("running the request pinned at submit; ignoring %s", "; ".join(ignored))


def pinned_request(chosen: Mapping[str, OptionValue]) -> PinnedRequest:
    """The run options of ``chosen``, as a record to pin (start options are left out)."""
    return PinnedRequest({o.name: chosen[o.name] for o in run_options() if o.scope == RUN})


def checkpoint_of(chosen: Mapping[str, OptionValue]) -> CheckpointLayout:
    """The checkpoint the values name; ConfigError when they name no inputs or no output dir."""
    values = {name: given.value for name, given in chosen.items()}
    given_inputs = [name for name in ("input_dir", "input_urls", "crawl", "select_from") if values.get(name)]
    if not given_inputs:
        raise ConfigError("give --input-dir (or INPUT_DIR), --input-urls (or INPUT_URLS), --crawl (or CRAWL), or "
                          "--select-from (or SELECT_FROM)")
    if "select_from" in given_inputs and len(given_inputs) > 1:
        raise ConfigError(f"--select-from reads the output of the run it names: give no --{given_inputs[0].replace('_', '-')}")
    if not values.get("output_dir"):
        raise ConfigError("give --output-dir (or OUTPUT_DIR)")
    checkpoint = values.get("checkpoint_path") or values["output_dir"]
    if is_s3(checkpoint) and values.get("checkpoint_path"):
        raise ConfigError(f"--checkpoint-path {checkpoint} is in an object store: it must be a POSIX path on the "
                          "cluster's shared file system, as the run's records are renamed and synced there")
    if is_s3(checkpoint):
        raise ConfigError(f"--output-dir {checkpoint} is in an object store: give --checkpoint-path (or "
                          "CHECKPOINT_PATH) too, a POSIX path on the cluster's shared file system for the run's "
                          "records (the checkpoint is the output dir unless you give one)")
    return CheckpointLayout(checkpoint)


def request_of(chosen: Mapping[str, OptionValue]) -> RunRequest:
    """The run request the values describe, carrying them (for the run's record of its options)."""
    layout = checkpoint_of(chosen)
    values = {name: given.value for name, given in chosen.items()}
    phases = PHASES.settings_from_options(values)
    if is_s3(values["output_dir"]):
        _check_store_output(values)
        values["download_dir"] = values.get("download_dir") or str(layout.root / DOWNLOADS_DIR)
    request = RunRequest.from_flags(values, phases)
    request.pinned = pinned_request(chosen)
    return request


def _check_store_output(values: Mapping[str, Any]) -> None:
    """Refuse, before anything is written, an output prefix whose bucket is missing or closed
    to these credentials, and ``--new-run``, which would move the previous run's outputs
    aside (a store has no rename)."""
    if values.get("new_run"):
        raise ConfigError(f"--output-dir {values['output_dir']}: --new-run moves the previous run's outputs aside, "
                          "which an object store cannot do; give the new run a new prefix")
    place_of(values["output_dir"]).check("--output-dir")

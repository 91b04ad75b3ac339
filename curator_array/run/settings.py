"""How each run option gets its value for one start, and where the value came from.

Precedence, the same at ``submit`` and in an element: a flag, else the site's ``[env]``,
else the caller's environment, else the default. An element queued by ``submit`` is given
``--request ID`` instead: it then runs the run options ``submit`` pinned in the checkpoint
(``PinnedRequest``), whatever a container runtime let through, and takes only its start
options (``cluster``, ``node_ip``, ...) from itself. A flag that contradicts the pinned
request is refused; a variable that does is reported and ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import ConfigError
from ..core.layout import CheckpointLayout
from ..core.records import PinnedRequest
from .options import RUN_OPTIONS, SITE_ENV_VARIABLE
from .request import RunRequest

logger = logging.getLogger(__name__)

FLAG, SITE, ENVIRONMENT, DEFAULT = "flag", "site [env]", "environment", "default"


@dataclass(frozen=True)
class Setting:
    """An option's value and where it came from (``FLAG``, ``SITE``, ``ENVIRONMENT``, ``DEFAULT``)."""

    value: Any
    source: str

    def to_json(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"value": value, "source": self.source}

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Setting:
        value = payload["value"]
        return cls(tuple(value) if isinstance(value, list) else value, str(payload["source"]))


Settings = dict[str, Setting]


def resolve(
    flags: Mapping[str, Any], environment: Mapping[str, str], site_env: Mapping[str, str] | None = None,
    site_label: str = SITE,
) -> Settings:
    """Every option's value: a flag, else the site's ``[env]``, else ``environment``, else the default.

    ``flags`` holds only the options given on the command line, already typed. Variables
    are read with the option's own rules (set but empty counts as unset); a bad one is a
    ConfigError naming the variable, its value and where it came from.
    """
    site_env = site_env or {}
    site_names = {n for n in environment.get(SITE_ENV_VARIABLE, "").split(",") if n}
    settings: Settings = {}
    for option in RUN_OPTIONS:
        if option.name in flags:
            settings[option.name] = Setting(flags[option.name], FLAG)
            continue
        variable = option.variable
        if str(site_env.get(variable, "")).strip():
            raw, source = str(site_env[variable]), site_label
        elif environment.get(variable, "").strip():
            raw, source = environment[variable], SITE if variable in site_names else ENVIRONMENT
        else:
            settings[option.name] = Setting(option.default, DEFAULT)
            continue
        try:
            settings[option.name] = Setting(option.parse(raw), source)
        except ValueError as problem:
            where = "the environment" if source == ENVIRONMENT else source
            raise ConfigError(f"{variable}={raw!r} from {where}: {problem}") from None
    return settings


def pinned_request(settings: Mapping[str, Setting]) -> PinnedRequest:
    """The run options of ``settings``, as a record to pin (start options are left out)."""
    return PinnedRequest({o.name: settings[o.name].to_json() for o in RUN_OPTIONS if o.scope == "run"})


def upgraded(pinned: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Pinned settings as today's options name them: ``dedup`` was the per-task flag before
    it named the dedup phases (a request pinned then says ``dedup: true``)."""
    settings = dict(pinned)
    if isinstance(settings.get("dedup", {}).get("value"), bool):
        settings["dedup_within_task"] = settings.pop("dedup")
    return settings


def with_pinned_request(own: Settings, pinned: PinnedRequest) -> Settings:
    """``pinned``'s run options and ``own``'s start options; refuse a flag that contradicts ``pinned``."""
    settings: Settings = {}
    ignored = []
    chosen = upgraded(pinned.settings)
    for option in RUN_OPTIONS:
        mine = own[option.name]
        if option.scope == "start" or option.name not in chosen:
            settings[option.name] = mine
            continue
        theirs = Setting.from_json(chosen[option.name])
        if option.name == "checkpoint_path" and theirs.value is None:  # the run's output dir, by default
            theirs = Setting(chosen["output_dir"]["value"], theirs.source)
        if mine.source != DEFAULT and mine.value != theirs.value:
            if mine.source == FLAG:
                raise ConfigError(
                    f"{option.flag} {option.show(mine.value)!r} differs from the request this element was "
                    f"queued with ({option.show(theirs.value)!r}, from {theirs.source} at submit): drop the flag, "
                    "or submit again with it"
                )
            ignored.append(f"{option.variable}={option.show(mine.value)} (the request has "
                           f"{option.show(theirs.value)!r})")
        settings[option.name] = theirs
    if ignored:
        logger.warning("running the request pinned at submit; ignoring %s", "; ".join(ignored))
    return settings


def settings_for_start(flags: Mapping[str, Any], environment: Mapping[str, str]) -> Settings:
    """What this start runs: its own flags and variables, or, with ``--request``, the pinned request."""
    own = resolve(flags, environment)
    request_id = own["request"].value
    if not request_id:
        return own
    checkpoint = own["checkpoint_path"].value or own["output_dir"].value
    if not checkpoint:
        raise ConfigError("--request needs the run's checkpoint: give --checkpoint-path (or CHECKPOINT_PATH)")
    return with_pinned_request(own, PinnedRequest.read(CheckpointLayout(checkpoint), request_id))


def request_of(settings: Mapping[str, Setting]) -> RunRequest:
    """The run request the settings describe, carrying them (for the run's record of its options)."""
    values = {name: setting.value for name, setting in settings.items()}
    if not values.get("input_dir") and not values.get("input_urls") and not values.get("crawl"):
        raise ConfigError("give --input-dir (or INPUT_DIR), --input-urls (or INPUT_URLS), or --crawl (or CRAWL)")
    if not values.get("output_dir"):
        raise ConfigError("give --output-dir (or OUTPUT_DIR)")
    request = RunRequest.from_flags(values)
    request.settings = dict(settings)
    return request

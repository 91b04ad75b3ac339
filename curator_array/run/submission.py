"""A submitted run carries itself: its options are resolved and pinned before anything is queued.

``submit`` resolves every run option once, on the login node (flag > site ``[env]`` >
environment > default), refuses a bad value there, pins the run contract and the options
(``PinnedRequest``), and queues elements that are given only the checkpoint and the
request's id: each runs exactly the pinned options, whatever a container runtime lets
through to it. ``retry --submit`` starts from the run's latest pinned options, with the
flags it is given on top.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.atomic import write_bytes_atomic
from ..core.layout import CheckpointLayout
from ..core.phases import CURATION, PHASES
from ..core.records import PinnedRequest
from ..core.run_contract import read_run_config
from ..core.sharding import ShardRange
from ..slurm.sites import SiteConfig
from ..slurm.submit import Submission, latest_request, plan_submissions
from .options import RUN_OPTIONS
from .request import RunRequest
from .settings import FLAG, SITE, Setting, Settings, resolve, upgraded


def submission_settings(flags: Mapping[str, Any], site: SiteConfig | None, environment: Mapping[str, str]) -> Settings:
    """The settings ``submit`` pins: its run flags, the site's ``[env]``, the environment, the defaults."""
    label = f"{SITE} of site_configs/{site.name}.toml" if site else SITE
    return resolve(flags, environment, site.env if site else {}, label)


def run_request_id(layout: CheckpointLayout) -> str | None:
    """The run's latest pinned options: of its latest submission, else of its first start."""
    return latest_request(layout) or read_run_config(layout).request


def retry_settings(layout: CheckpointLayout, flags: Mapping[str, Any], environment: Mapping[str, str]) -> Settings:
    """The run's latest pinned options with ``flags`` on top; a run without pinned options
    (written by an older version) is resolved as ``submit`` would."""
    request_id = run_request_id(layout)
    if request_id is None:
        return resolve(flags, environment)
    pinned = upgraded(PinnedRequest.read(layout, request_id).settings)
    settings: Settings = {}
    for option in RUN_OPTIONS:
        if option.name in flags:
            settings[option.name] = Setting(flags[option.name], FLAG)
        elif option.name in pinned:
            settings[option.name] = Setting.from_json(pinned[option.name])
        else:
            settings[option.name] = Setting(option.default, "default")
    return settings


def with_files_in_checkpoint(settings: Settings, layout: CheckpointLayout, copy: bool = True) -> Settings:
    """``settings`` with every file option's file copied into the checkpoint (named by its
    content) and the option pointing there: the checkpoint is visible to every element under
    every container runtime, and the copy cannot change under a queued run."""
    moved = dict(settings)
    for option in RUN_OPTIONS:
        setting = settings.get(option.name)
        if option.kind != "file" or setting is None or not setting.value:
            continue
        source = Path(setting.value)
        if layout.holds(source):
            continue
        content = source.read_bytes()
        target = layout.pinned_file_path(hashlib.sha256(content).hexdigest()[:16], source.name)
        if copy and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(target, content)
        moved[option.name] = Setting(str(target), f"{setting.source}, copied from {source}")
    return moved


def queued_elements(
    request: RunRequest, request_id: str, wanted: Sequence[int], shards: ShardRange, script: str,
    max_size: int | None, parallel: int | None, phase: str = CURATION,
) -> list[Submission]:
    """The windows to queue: elements get the checkpoint and the request id as arguments, and the
    job script the paths it mounts (it cannot read them from the request)."""
    paths = {"OUTPUT_DIR": request.options.output_dir, "CHECKPOINT_PATH": request.checkpoint}
    if request.options.input_dir:
        paths["INPUT_DIR"] = request.options.input_dir
    return plan_submissions(wanted, shards, script, max_size, parallel,
                            ("--checkpoint-path", request.checkpoint, "--request", request_id), paths, request_id,
                            phase)


def queued_phases(
    request: RunRequest, request_id: str, wanted: Mapping[str, Sequence[int]], shards: ShardRange, script: str,
    max_size: int | None, parallel: int | None,
) -> list[list[Submission]]:
    """One group of windows per phase that has elements to queue, in the phases' order:
    curation, then the dedup phases the request has (see ``slurm.submit.chained``)."""
    settings = request.options.dedup_settings()
    groups = []
    for phase in (CURATION, *(PHASES if settings else ())):
        elements = shards if phase == CURATION else settings.elements(phase, shards)
        indices = [i for i in wanted.get(phase, ()) if i in elements]
        if indices:
            groups.append(queued_elements(request, request_id, indices, elements, script, max_size, parallel, phase))
    return groups


def phase_elements(request: RunRequest, shards: ShardRange) -> dict[str, ShardRange]:
    """Every phase of the request's run and its elements (curation alone without ``--dedup``)."""
    settings = request.options.dedup_settings()
    return {CURATION: shards, **({p: settings.elements(p, shards) for p in PHASES} if settings else {})}

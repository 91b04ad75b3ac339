"""The run contract in ``run.json``: what defines a logical run, and every start checked
against it.

run.json pins the shard range, the source tasks (by digest), the pipeline's fingerprint and
the frozen listing. It is created once, atomically, by the first start; every later start
(array element, ``submit``, ``retry --submit``) compares its own values and refuses a
difference, naming it. Fields an older run.json lacks are pinned by the first start that
has them. ``archive_run`` moves a run's records aside for a new logical run.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .amendments import (
    MALFORMED,
    Amendment,
    read_amendments,
)
from .atomic import create_json_exclusive, fsync_directory, write_json_atomic
from .errors import CheckpointMismatchError, ConfigError, CorruptCheckpointError
from .fingerprint import PipelineFingerprint
from .layout import CheckpointLayout, utc_now
from .records.base import SCHEMA_VERSION, WRITTEN_BY, RecordError, load_json, require_int
from .records.run import ListingRef
from .sharding import ShardRange


def source_digest(task_ids: Sequence[str]) -> str:
    """Order-independent digest of a source listing."""
    hasher = hashlib.sha256()
    for task_id in sorted(task_ids):
        hasher.update(task_id.encode())
        hasher.update(b"\n")
    return hasher.hexdigest()


@dataclass(frozen=True)
class RunConfig:
    """What ``run.json`` pins for the whole logical run.

    ``pipeline`` is the pipeline's fingerprint, ``listing`` names the frozen listing of the
    input files, ``request`` the run options of the run's first start (a ``PinnedRequest``
    id), and ``run_id`` tells this run's manifests from those of an archived one. They are
    None in a ``run.json`` written by the reference system or an older curator-array; they
    are then pinned on the next start.
    """

    shards: ShardRange
    source_task_count: int | None = None
    source_task_digest: str | None = None
    pipeline: PipelineFingerprint | None = None
    run_id: str | None = None
    listing: ListingRef | None = None
    request: str | None = None

    @property
    def minimum_shard_index(self) -> int:
        return self.shards.minimum

    @property
    def total_shards(self) -> int:
        return self.shards.total

    @property
    def output_format(self) -> str | None:
        """The format the pinned pipeline writes (None before a pipeline is pinned)."""
        return self.pipeline.output if self.pipeline is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.shards.to_json(),
            "source_task_count": self.source_task_count,
            "source_task_digest": self.source_task_digest,
            "pipeline": self.pipeline.to_json() if self.pipeline is not None else None,
            "run_id": self.run_id,
            "listing": self.listing.to_json() if self.listing else None,
            "request": self.request,
            "schema_version": SCHEMA_VERSION,
            "created_at": utc_now(),
            "created_by": WRITTEN_BY,
        }

    @classmethod
    def from_json(cls, payload: Any, pinned: dict[str, Any] | None = None) -> RunConfig:
        """``pinned`` holds fields an older run.json lacks, read from their pin files."""
        if not isinstance(payload, dict):
            raise RecordError("expected a JSON object")
        values = {name: payload.get(name) for name in PINNED_FIELDS}
        values.update({k: v for k, v in (pinned or {}).items() if values.get(k) is None})
        try:
            shards = ShardRange(require_int(payload, "total_shards"), require_int(payload, "minimum_shard_index"))
        except ConfigError as exc:
            raise RecordError(str(exc)) from None
        count = payload.get("source_task_count")
        return cls(
            shards,
            source_task_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
            source_task_digest=payload.get("source_task_digest"),
            pipeline=PipelineFingerprint.from_json(values["pipeline"]) if isinstance(values["pipeline"], dict) else None,
            run_id=payload.get("run_id"),
            listing=ListingRef.from_json(values["listing"]) if values["listing"] is not None else None,
            request=values["request"] if isinstance(values["request"], str) else None,
        )


PINNED_FIELDS = ("pipeline", "listing", "request")


def _read_run_payload(layout: CheckpointLayout) -> dict[str, Any]:
    path = layout.run_file
    if not path.is_file():
        early = sorted(layout.failed_tasks_root.rglob("attempt_error.json"))
        if early:
            raise ConfigError(
                f"no run configuration at {path} yet: {len(early)} attempt(s) ended before the run was recorded "
                f"(the latest says why: {early[-1]}); submit the shards again"
            )
        raise ConfigError(
            f"no run configuration at {path}: is {layout.root} the checkpoint path of the "
            "original run? (it is created by the first shard that starts)"
        )
    payload = load_json(path)
    if not isinstance(payload, dict):
        raise CorruptCheckpointError(f"{path}: expected a JSON object")
    return payload


def read_run_config(layout: CheckpointLayout) -> RunConfig:
    """The run configuration, or a ConfigError telling the user to check the path."""
    payload = _read_run_payload(layout)
    pinned = {
        name: load_json(layout.pin_file(name)).get(name)
        for name in PINNED_FIELDS
        if payload.get(name) is None and layout.pin_file(name).is_file()
    }
    try:
        return RunConfig.from_json(payload, pinned)
    except RecordError as exc:
        raise CorruptCheckpointError(f"{layout.run_file}: {exc}") from None


def ensure_run_config(
    layout: CheckpointLayout,
    shards: ShardRange,
    source_task_ids: Sequence[str],
    pipeline: Mapping[str, Any] | None = None,
    listing: ListingRef | None = None,
    request: str | None = None,
) -> RunConfig:
    """Create run.json for a new run, or check that this attempt matches the original.

    Many array elements start at once; exactly one creates the file and the others compare
    against it: the shard range, the source tasks (by digest) and, when given, the
    pipeline's fingerprint and the frozen listing. Without a frozen listing, the full id
    list is kept next to it (named by digest, so racing writers of different listings
    cannot overwrite each other) to report what changed.
    """
    digest = source_digest(source_task_ids)
    pipeline = PipelineFingerprint.from_json(pipeline) if pipeline is not None else None
    wanted = RunConfig(shards, len(source_task_ids), digest, pipeline, secrets.token_hex(8), listing, request)
    try:
        if listing is None:
            create_json_exclusive(layout.source_list_path(digest), {"digest": digest, "task_ids": sorted(source_task_ids)})
        created = create_json_exclusive(layout.run_file, wanted.to_json())
    except OSError as exc:
        raise unwritable(layout, exc) from None
    if created:
        return wanted
    existing = pin_missing(layout, read_run_config(layout), pipeline=pipeline, listing=listing, request=request)
    check_run(layout, existing, shards, source_task_ids, pipeline)
    return existing


def repin_listing(layout: CheckpointLayout, run: RunConfig, task_ids: Sequence[str], listing: ListingRef) -> RunConfig:
    """run.json with a grown listing (``--relist`` took files added to the tree): one start
    outside an array rewrites it, never the elements of an array."""
    grown = replace(run, source_task_count=len(task_ids), source_task_digest=source_digest(task_ids), listing=listing)
    try:
        write_json_atomic(layout.run_file, grown.to_json())
    except OSError as exc:
        raise unwritable(layout, exc) from None
    return grown


@dataclass(frozen=True)
class RunContract:
    """What a run pins, as it stands: run.json's values and the amendments made since
    (``--repair``, ``--relist``), read in one place (``read``), once per start; a start is
    compared with it in one place (``check``). What preparation amends or pins as it goes
    joins the value it holds (``amended``, ``with_run``) instead of being read back."""

    layout: CheckpointLayout
    run: RunConfig
    amendments: tuple[Amendment, ...] = ()

    @classmethod
    def read(cls, layout: CheckpointLayout, run: RunConfig | None = None) -> RunContract:
        """The run's contract; ``run``: its run.json, when the caller has read it already."""
        return cls(layout, run if run is not None else read_run_config(layout), tuple(read_amendments(layout)))

    def amended(self, amendment: Amendment) -> RunContract:
        """The contract with an amendment this start has just written."""
        return replace(self, amendments=(*self.amendments, amendment))

    def with_run(self, run: RunConfig) -> RunContract:
        """The contract with run.json as this start has just pinned it."""
        return replace(self, run=run)

    @property
    def pipeline(self) -> PipelineFingerprint | None:
        """The pinned pipeline as the amendments left it (None before one is pinned)."""
        if self.run.pipeline is None:
            return None
        policies = [a.malformed for a in self.amendments if a.kind == MALFORMED and a.malformed]
        return self.run.pipeline.with_reader_policy(policies[-1]) if policies else self.run.pipeline

    def amended_files(self) -> dict[str, tuple[int, int]]:
        """Each amended input file's size and mtime as its latest amendment recorded them."""
        files: dict[str, tuple[int, int]] = {}
        for amendment in self.amendments:
            files.update(amendment.files)
        return files

    def check(self, shards: ShardRange, source_task_ids: Sequence[str] | None = None,
              pipeline: Mapping[str, Any] | None = None) -> None:
        """Refuse what differs from the run: shard range, listing (when given), pipeline (when
        both pinned; the run's as its amendments left it)."""
        layout, existing = self.layout, self.run
        check_shard_range(layout, existing, shards)
        if (
            source_task_ids is not None
            and existing.source_task_digest is not None
            and existing.source_task_digest != source_digest(source_task_ids)
        ):
            raise CheckpointMismatchError(_describe_listing_change(layout, existing, source_task_ids))
        if pipeline is None or self.pipeline is None:
            return
        wanted, pinned = PipelineFingerprint.from_json(pipeline), self.pipeline
        changes = pinned.changes_to(wanted)
        if changes:
            repair = ("--repair changes it for the tasks that have not finished, "
                      if pinned.only_the_policy_differs(wanted) else "")
            raise CheckpointMismatchError(
                f"checkpoint {layout.root} belongs to a run with another pipeline ({'; '.join(changes)}): "
                f"{repair}run the original pipeline, start a new logical run with --new-run (it archives this run's "
                "records and outputs), or use a new checkpoint path"
            )


def check_run(
    layout: CheckpointLayout,
    existing: RunConfig,
    shards: ShardRange,
    source_task_ids: Sequence[str] | None = None,
    pipeline: Mapping[str, Any] | None = None,
) -> None:
    """``RunContract.check`` of ``existing`` with its amendments: every start is compared with
    the run it joins this way (elements, later phases' elements, ``submit``, ``retry --submit``)."""
    RunContract.read(layout, existing).check(shards, source_task_ids, pipeline)


def unwritable(layout: CheckpointLayout, exc: OSError) -> ConfigError:
    return ConfigError(
        f"checkpoint path {layout.root} is not writable ({exc.strerror}): every array element must be "
        "able to write there; choose a writable shared directory (CHECKPOINT_PATH)"
    )


def pin_missing(
    layout: CheckpointLayout, existing: RunConfig, pipeline: Mapping[str, Any] | None = None,
    listing: ListingRef | None = None, request: str | None = None,
) -> RunConfig:
    """Pin fields an older run.json lacks (its first start after this change decides them)."""
    if pipeline is not None and existing.pipeline is None:
        pinned = _pin(layout, "pipeline", PipelineFingerprint.from_json(pipeline).to_json())
        existing = replace(existing, pipeline=PipelineFingerprint.from_json(pinned))
    if request is not None and existing.request is None:
        existing = replace(existing, request=_pin(layout, "request", request))
    if listing is not None and existing.listing is None:
        existing = replace(existing, listing=ListingRef.from_json(_pin(layout, "listing", listing.to_json())))
    return existing


def _pin(layout: CheckpointLayout, name: str, value: Any) -> Any:
    """The first start to create the pin file wins, exactly as for run.json itself; it then
    rewrites run.json with the value. Everyone else gets the pinned value to compare with."""
    if create_json_exclusive(layout.pin_file(name), {name: value, "pinned_at": utc_now()}):
        payload = _read_run_payload(layout)
        payload[name] = value
        write_json_atomic(layout.run_file, payload)
        return value
    return load_json(layout.pin_file(name)).get(name)


def check_shard_range(layout: CheckpointLayout, existing: RunConfig, shards: ShardRange) -> None:
    differences = [
        f"{name}={mine} (the run has {theirs})"
        for name, mine, theirs in (
            ("total_shards", shards.total, existing.total_shards),
            ("minimum_shard_index", shards.minimum, existing.minimum_shard_index),
        )
        if mine != theirs
    ]
    if differences:
        raise CheckpointMismatchError(
            f"this attempt uses {' and '.join(differences)} but checkpoint {layout.root} "
            "belongs to a run with another shard configuration: keep TOTAL_SHARDS and "
            "MINIMUM_SHARD_INDEX of the original run (`curator-array retry --format fields` "
            "prints them), or use a new checkpoint path for a new run"
        )


def archive_run(layout: CheckpointLayout, outputs: Path | None = None, kept: Sequence[str] = ()) -> Path | None:
    """Move the current run's records, and its outputs, aside, so the checkpoint and the
    output dir can hold a new logical run without mixing the two.

    Everything that describes the old run (run.json, manifests, listings, attempt and task records,
    submissions) moves into ``.archived_runs/<time>-<run id>/``, and every entry of ``outputs``
    (the output dir) into its ``outputs/``, but the checkpoint's metadata and the names in
    ``kept`` (a download cache). Outputs on another file system than the checkpoint are
    refused before anything moves, saying how to move them. Returns the archive, or None when
    there was no run. One process must do this (the submitter, or a run outside an array),
    never every array element at once.
    """
    if not layout.run_file.is_file():
        return None
    moving = _old_outputs(outputs, layout, kept)
    run = read_run_config(layout)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    archive = layout.archive_root / f"{stamp}-{run.run_id or 'run'}"
    if moving and os.stat(outputs).st_dev != os.stat(layout.metadata_dir).st_dev:
        raise ConfigError(f"--new-run: {outputs} holds {len(moving)} output(s) of the previous run (e.g. "
                          f"{moving[0].name}) on another file system than the checkpoint: move them away first, "
                          "or give a new --output-dir")
    archive.mkdir(parents=True)
    for path in (layout.completion_dir, layout.failed_tasks_root, layout.task_records_root, layout.phases_root,
                 layout.submissions_file):
        if path.exists():
            os.rename(path, archive / path.name)
    if moving:
        (archive / "outputs").mkdir()
        for path in moving:
            os.rename(path, archive / "outputs" / path.name)
        fsync_directory(outputs)
    fsync_directory(layout.metadata_dir)
    return archive


def _old_outputs(outputs: Path | None, layout: CheckpointLayout, kept: Sequence[str]) -> list[Path]:
    if outputs is None or not Path(outputs).is_dir():
        return []
    spared = {layout.metadata_dir.resolve(), *(Path(outputs, name).resolve() for name in kept)}
    return sorted(p for p in Path(outputs).iterdir() if p.resolve() not in spared)


def _describe_listing_change(
    layout: CheckpointLayout, existing: RunConfig, task_ids: Sequence[str]
) -> str:
    advice = (
        "restore the original inputs, or use a new checkpoint path for a new run "
        "(retried shards must see the same source tasks)"
    )
    path = layout.source_list_path(existing.source_task_digest or "")
    if not path.is_file():
        return (
            f"the source-task listing changed since checkpoint {layout.root} was created "
            f"({existing.source_task_count} tasks then, {len(task_ids)} now): {advice}"
        )
    original = set(load_json(path).get("task_ids", []))
    current = set(task_ids)
    added, removed = sorted(current - original), sorted(original - current)
    examples = "; ".join(
        f"{label} e.g. {', '.join(ids[:3])}" for label, ids in (("added", added), ("removed", removed)) if ids
    )
    return (
        f"the source-task listing changed since checkpoint {layout.root} was created: "
        f"{len(added)} id(s) added, {len(removed)} removed ({examples}): {advice}"
    )

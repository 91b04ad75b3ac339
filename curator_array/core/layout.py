"""Where everything lives inside a checkpoint directory; creating nothing until asked.

The layout is the reference system's, so each tool can read the other's runs; the files
marked "ours" are curator-array's additions, which the reference system ignores::

    CHECKPOINT/.nemo_curator_metadata/
      .slurm_array_completion/run.json                        the run contract, written once
      .slurm_array_completion/completed_slurm_array_<S>.json  one per complete shard
      .slurm_array_completion/listing-<digest>.parquet        the frozen input listing (ours)
      .slurm_array_completion/source_tasks-<digest>.json      the full id list of sources that
                                                              cannot freeze a listing (ours)
      .slurm_array_completion/pin-<field>.json                a field pinned after run.json (ours)
      .slurm_array_completion/request-<id>.json               run options of a start or submission,
                                                              with their sources (ours)
      .slurm_array_completion/crawl-<crawl>.warc.paths.gz     a Common Crawl snapshot's paths list,
                                                              saved once for every element (ours)
      .failed_tasks/<attempt>/shard_<S>/failed_tasks.json     FailedTask results of one attempt
      .failed_tasks/<attempt>/shard_<S>/attempt_error.json    why an attempt ended early (ours)
      .task_records/shard_<S>/<attempt>.jsonl                 whose records these are (ours)
      .task_records/shard_<S>/<attempt>.parts/*.jsonl         the output parts its workers wrote,
                                                              so a rerun skips them (ours)
      .profiles/shard_<S>/<attempt>/<host>-<pid>.prof         what each worker process spent its
                                                              time on, with --profile (ours)
      .ray_rendezvous/slurm_job_<J>_step_<T>_restart_<R>/     where the nodes of a multi-node
                                                              element meet (ours)
      .oci_bundles/job_<J>_restart_<R>/                       the OCI bundle a job script of SLURM's
                                                              own containers wrote for its job,
                                                              removed when the job ends (ours)
      .phases/<phase>/...                                     the manifests, attempt records and
                                                              data of the phases after the root
                                                              (ours, core.records.phase)
      pinned_files/<digest>-<name>                            a file option's file, copied at
                                                              submit (ours)
      submissions.jsonl                                       what submit and retry --submit
                                                              queued (ours)
      .archived_runs/<time>-<run id>/                         earlier runs' records (ours)

``<attempt>`` is ``slurm_job_<J>/array_task_<A>/restart_<R>`` under SLURM and
``local_attempt_<id>`` outside it, so an old failure can never mark a later attempt failed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

METADATA_DIR = ".nemo_curator_metadata"
COMPLETION_DIR = ".slurm_array_completion"
FAILED_TASKS_DIR = ".failed_tasks"
RENDEZVOUS_DIR = ".ray_rendezvous"
OCI_BUNDLES_DIR = ".oci_bundles"  # written and removed by the oci site script (slurm.oci_bundle)
TASK_RECORDS_DIR = ".task_records"
PROFILES_DIR = ".profiles"
ARCHIVE_DIR = ".archived_runs"
REMOVED_DIR = ".removed"  # under the output dir: dropped documents (--keep-removed), a folder per producer
PIPELINE_REMOVED_DIR = f"{REMOVED_DIR}/pipeline"  # what the pipeline's steps dropped, a task's beside its output
PHASES_DIR = ".phases"
PINNED_FILES_DIR = "pinned_files"
_PINNED_NAME = re.compile(r"[0-9a-f]{16}-(.+)")
RUN_FILE = "run.json"
MANIFEST_PREFIX = "completed_slurm_array_"
FAILED_TASKS_FILE = "failed_tasks.json"
ATTEMPT_ERROR_FILE = "attempt_error.json"
SUBMISSIONS_FILE = "submissions.jsonl"


def utc_now() -> str:
    """Milliseconds: a shard of a second or two is placed in time by its records (the report's charts)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class AttemptId:
    """One try at one shard; each gets its own failed-task directory.

    Built from the job environment by ``slurm.jobenv.JobEnvironment.attempt_id``.
    """

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return "/".join(self.parts)


@dataclass(frozen=True)
class CheckpointLayout:
    """Paths inside one checkpoint directory."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def metadata_dir(self) -> Path:
        return self.root / METADATA_DIR

    @property
    def completion_dir(self) -> Path:
        return self.metadata_dir / COMPLETION_DIR

    @property
    def run_file(self) -> Path:
        return self.completion_dir / RUN_FILE

    @property
    def failed_tasks_root(self) -> Path:
        return self.metadata_dir / FAILED_TASKS_DIR

    @property
    def task_records_root(self) -> Path:
        return self.metadata_dir / TASK_RECORDS_DIR

    def task_records_dir(self, shard_index: int) -> Path:
        return self.task_records_root / f"shard_{shard_index}"

    def task_record_path(self, attempt: AttemptId, shard_index: int) -> Path:
        return self.task_records_dir(shard_index) / f"{'.'.join(attempt.parts)}.jsonl"

    @property
    def rendezvous_root(self) -> Path:
        return self.metadata_dir / RENDEZVOUS_DIR

    @property
    def phases_root(self) -> Path:
        return self.metadata_dir / PHASES_DIR

    @property
    def submissions_file(self) -> Path:
        return self.metadata_dir / SUBMISSIONS_FILE

    @property
    def archive_root(self) -> Path:
        return self.metadata_dir / ARCHIVE_DIR

    def pinned_file_path(self, digest: str, name: str) -> Path:
        """A file option's copy, named by its content: every run that uses it shares it."""
        return self.metadata_dir / PINNED_FILES_DIR / f"{digest}-{name}"

    def holds(self, path: Path) -> bool:
        return Path(path).resolve().is_relative_to(self.root.resolve())

    def pin_file(self, field: str) -> Path:
        """Where a field missing from an older run.json is pinned first."""
        return self.completion_dir / f"pin-{field}.json"

    def manifest_path(self, shard_index: int) -> Path:
        return self.completion_dir / f"{MANIFEST_PREFIX}{shard_index}.json"

    def source_list_path(self, digest: str) -> Path:
        return self.completion_dir / f"source_tasks-{digest[:16]}.json"

    def request_path(self, request_id: str) -> Path:
        return self.completion_dir / f"request-{request_id}.json"

    def crawl_paths_path(self, crawl: str) -> Path:
        return self.completion_dir / f"crawl-{crawl}.warc.paths.gz"

    def listing_path(self, name: str) -> Path:
        return self.completion_dir / name

    def attempt_dir(self, attempt: AttemptId, shard_index: int) -> Path:
        return self.failed_tasks_root.joinpath(*attempt.parts, f"shard_{shard_index}")

    def profile_dir(self, attempt: AttemptId, shard_index: int) -> Path:
        return self.metadata_dir.joinpath(PROFILES_DIR, f"shard_{shard_index}", *attempt.parts)


@dataclass(frozen=True)
class PhaseLayout:
    """Where the records and data of the phase ``name`` live inside a checkpoint; ``noun``
    names one element's data (``bucket_3.pairs``)::

        .phases/<name>/completed_<E>.json                  one per complete element
        .phases/<name>/attempts/<attempt>/element_<E>.json why an element's attempt ended early
        .phases/<name>/data/...                            what the elements wrote, atomically
    """

    layout: CheckpointLayout
    name: str
    noun: str = "element"

    @property
    def root(self) -> Path:
        return self.layout.phases_root / self.name

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def manifest_path(self, index: int) -> Path:
        return self.root / f"completed_{index}.json"

    def attempt_path(self, attempt: AttemptId, index: int) -> Path:
        return self.root / "attempts" / ".".join(attempt.parts) / f"element_{index}.json"

    def data_path(self, index: int, suffix: str = ".parquet") -> Path:
        return self.data_dir / f"{self.noun}_{index}{suffix}"


def given_name(path: str | os.PathLike) -> str:
    """A file's name as the user gave it: a copy pinned in a checkpoint
    (``CheckpointLayout.pinned_file_path``) without the digest its name begins with."""
    path = Path(path)
    pinned = _PINNED_NAME.fullmatch(path.name) if path.parent.name == PINNED_FILES_DIR else None
    return pinned.group(1) if pinned else path.name

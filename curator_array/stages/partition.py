"""``FilePartitioningStage``: the source that lists input files as deterministic tasks."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import pyarrow as pa

from ..core.errors import ConfigError, InputError
from ..core.formats import DEFAULT_FORMAT, get_format
from .base import FreezableSource
from .listing import Listing
from .tasks import INPUT_BYTES, FileGroupTask

logger = logging.getLogger(__name__)


def group_task_id(relative_paths: list[str]) -> str:
    """Depends only on paths relative to the input root, so not on the mount point."""
    digest = hashlib.sha256("\n".join(sorted(relative_paths)).encode()).hexdigest()
    return f"fg-{digest[:32]}"


class FilePartitioningStage(FreezableSource):
    """Lists ``input_dir`` recursively (sorted; hidden entries skipped) and groups the files.

    Hidden files and directories are skipped so a checkpoint or a writer's temporary file
    inside the input tree never becomes a task.
    """

    name = "file_partitioning"
    pinned = ("file_type", "files_per_partition")

    def __init__(self, input_dir: str | Path, file_type: str = DEFAULT_FORMAT, files_per_partition: int = 1):
        self._suffixes = get_format(file_type, "input").suffixes
        if files_per_partition < 1:
            raise ConfigError(f"files_per_partition must be >= 1, got {files_per_partition}")
        self.input_dir = Path(input_dir)
        self.file_type = file_type
        self.files_per_partition = files_per_partition

    def _walk(self) -> tuple[list[str], list[int], list[int]]:
        """Relative paths (sorted), sizes and mtimes of the matching files, in one walk."""
        root = self.input_dir
        if not root.is_dir():
            raise ConfigError(f"input directory {root} does not exist or is not a directory")
        suffixes = self._suffixes
        found: list[tuple[str, int, int]] = []
        pending = [""]
        while pending:
            relative = pending.pop()
            try:
                with os.scandir(root / relative if relative else root) as entries:
                    for entry in entries:
                        if entry.name.startswith("."):
                            continue
                        path = f"{relative}/{entry.name}" if relative else entry.name
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(path)
                        elif entry.name.endswith(suffixes):
                            status = entry.stat()
                            found.append((path, status.st_size, status.st_mtime_ns))
            except OSError as error:
                raise InputError(f"cannot list {error.filename}: {error.strerror}") from None
        found.sort()
        if not found:
            raise ConfigError(self._nothing_to_read())
        return [f[0] for f in found], [f[1] for f in found], [f[2] for f in found]

    def _nothing_to_read(self) -> str:
        """Why a walk found no input, with what the directory holds instead: a run over nothing
        would "complete" every element with no work done."""
        root = self.input_dir.resolve()
        others = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
        message = f"no {self.file_type} input files ({', '.join(self._suffixes)}) under {root}"
        if not others:
            return f"{message}: the directory is empty"
        return (f"{message}: it holds {len(others)} other file(s), e.g. {others[0]}: is --input-file-type right, "
                "or --input-dir?")

    def list_relative_files(self) -> list[str]:
        return self._walk()[0]

    def snapshot(self) -> Listing:
        """Walk the input once: every file with its size, mtime, task id and shard hash."""
        paths, sizes, mtimes = self._walk()
        size = self.files_per_partition
        task_ids: list[str] = []
        for start in range(0, len(paths), size):
            group = paths[start:start + size]
            task_ids += [group_task_id(group)] * len(group)
        return Listing.from_rows(paths, sizes, mtimes, task_ids)

    def task_root(self) -> str:
        """What a task's files are named relative to (``FileGroupTask.root``)."""
        return str(self.input_dir)

    def tasks_from(self, rows: pa.Table) -> list[FileGroupTask]:
        """Tasks for listing rows (a shard's, or all), consecutive rows of a task together,
        each file at its ``location``."""
        tasks: list[FileGroupTask] = []
        for path, task_id, size in zip(rows.column("path").to_pylist(), rows.column("task_id").to_pylist(),
                                       rows.column("size").to_pylist()):
            if not tasks or tasks[-1].task_id != task_id:
                tasks.append(FileGroupTask(task_id=task_id, root=self.task_root(),
                                           metadata={"relative_files": [], INPUT_BYTES: 0}))
            tasks[-1].files.append(self.location(path))
            tasks[-1].metadata["relative_files"].append(path)
            tasks[-1].metadata[INPUT_BYTES] += size
        return tasks

    def list_tasks(self) -> list[FileGroupTask]:
        return self.tasks_from(self.snapshot().table)

"""``FilePartitioningStage``: the source that lists input files as deterministic tasks."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from ..errors import ConfigError, InputError
from ..formats import get_format
from ..tasks import FileGroupTask
from .base import SourceStage

logger = logging.getLogger(__name__)

def group_task_id(relative_paths: list[str]) -> str:
    """Depends only on paths relative to the input root, so not on the mount point."""
    digest = hashlib.sha256("\n".join(sorted(relative_paths)).encode()).hexdigest()
    return f"fg-{digest[:32]}"


class FilePartitioningStage(SourceStage):
    """Lists ``input_dir`` recursively (sorted; hidden entries skipped) and groups the files.

    Hidden files and directories are skipped so a checkpoint or a writer's temporary file
    inside the input tree never becomes a task.
    """

    name = "file_partitioning"

    def __init__(self, input_dir: str | Path, file_type: str = "jsonl", files_per_partition: int = 1):
        self._suffixes = get_format(file_type, "input").suffixes
        if files_per_partition < 1:
            raise ConfigError(f"files_per_partition must be >= 1, got {files_per_partition}")
        self.input_dir = Path(input_dir)
        self.file_type = file_type
        self.files_per_partition = files_per_partition

    def list_relative_files(self) -> list[str]:
        root = self.input_dir
        if not root.is_dir():
            raise ConfigError(f"input directory {root} does not exist or is not a directory")
        suffixes = self._suffixes
        found: list[str] = []

        def raise_error(error: OSError) -> None:
            raise InputError(f"cannot list {error.filename}: {error.strerror}")

        for directory, subdirs, files in os.walk(root, onerror=raise_error):
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
            for filename in files:
                if filename.startswith(".") or not filename.endswith(suffixes):
                    continue
                found.append(Path(directory, filename).relative_to(root).as_posix())
        found.sort()
        if not found:
            logger.warning("no %s files (%s) under %s", self.file_type, ", ".join(suffixes), root)
        return found

    def list_tasks(self) -> list[FileGroupTask]:
        relative = self.list_relative_files()
        size = self.files_per_partition
        tasks = []
        for start in range(0, len(relative), size):
            group = relative[start : start + size]
            tasks.append(
                FileGroupTask(
                    task_id=group_task_id(group),
                    files=[str(self.input_dir / path) for path in group],
                    root=str(self.input_dir),
                    metadata={"relative_files": group},
                )
            )
        return tasks

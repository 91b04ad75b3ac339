"""``ObjectPartitioningStage``: an object store's prefix (``s3://bucket/prefix``) as a run's input.

The prefix is listed like a directory, once, at the run's first start, and frozen with the
run: the same rows (key relative to the prefix, size, modification time), so the same task
ids as a copy of those files on a shared disk, and the same shards. Each task names its
objects by URL, and the reader reads each from a local copy in ``$TMPDIR`` that it removes
after (``storage.places.fetched``): a store keeps its objects, so a copy on the shared disk
would only double the run's footprint there. Before an element works, its own objects are
checked against the listing, as files are.
"""

from __future__ import annotations

from ..core.errors import ConfigError
from ..storage import s3
from .listing import ChangedFile, changed_files
from .partition import FilePartitioningStage


class ObjectPartitioningStage(FilePartitioningStage):
    name = "object_partitioning"
    pinned = ("file_type", "files_per_partition")

    def __init__(self, input_dir: str, file_type: str, files_per_partition: int = 1):
        super().__init__(".", file_type, files_per_partition)
        self.prefix = s3.S3Url.parse(input_dir)
        self.input_dir = str(self.prefix)

    def _walk(self) -> tuple[list[str], list[int], list[int]]:
        found = s3.list_objects(self.input_dir, self._suffixes)
        if not found:
            raise ConfigError(f"no {self.file_type} input objects ({', '.join(self._suffixes)}) under {self.input_dir}")
        return [o.relative for o in found], [o.size for o in found], [o.mtime_ns for o in found]

    def location(self, relative: str) -> str:
        return self.prefix.join(relative)

    def relative(self, location: str) -> str:
        return location[len(self.input_dir):].lstrip("/")

    def task_root(self) -> str:
        """Objects are named by their URLs, relative to nothing."""
        return ""

    def changed_files(self, recorded: list[tuple[str, int, int]]) -> list[ChangedFile]:
        return changed_files(recorded, s3.object_states(location for location, _, _ in recorded))

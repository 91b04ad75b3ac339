"""The candidate pairs of one bucket, on disk: two arrays of identities, read a chunk at a
time straight into arrays (no table, no copy), and checked before they are used.

    magic (8 bytes) | pair count (uint64) | run id (16 bytes, ASCII) | first[n] | second[n]

all little-endian. A file that is too short, too long, or of another run is refused by
name, never half-read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..core.atomic import replacing
from ..core.errors import CorruptCheckpointError

MAGIC = b"CAPAIRS1"
HEADER = len(MAGIC) + 8 + 16


def write_pairs(path: Path, first: np.ndarray, second: np.ndarray, run_id: str | None) -> None:
    """The pairs at ``path``, complete and synced before the name appears."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as partial, open(partial, "wb") as handle:
        handle.write(MAGIC + np.uint64(len(first)).tobytes() + _run(run_id))
        handle.write(np.ascontiguousarray(first, dtype="<u8").tobytes())
        handle.write(np.ascontiguousarray(second, dtype="<u8").tobytes())


def pair_count(path: Path, run_id: str | None) -> int:
    """How many pairs ``path`` holds; CorruptCheckpointError naming it when it is not a whole
    pair file of this run."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            header = handle.read(HEADER)
    except OSError as exc:
        raise CorruptCheckpointError(f"{path}: cannot read its pairs ({exc.strerror}): rerun its bucket element") \
            from None
    if len(header) < HEADER or header[:len(MAGIC)] != MAGIC:
        raise CorruptCheckpointError(f"{path}: not a pair file: rerun its bucket element")
    count = int(np.frombuffer(header, "<u8", 1, len(MAGIC))[0])
    if header[len(MAGIC) + 8:] != _run(run_id):
        raise CorruptCheckpointError(f"{path}: the pairs of another run ({header[len(MAGIC) + 8:].decode().strip()}), "
                                     f"not of {run_id}: rerun its bucket element")
    if size != HEADER + 16 * count:
        raise CorruptCheckpointError(f"{path}: {size:,} bytes, not the {HEADER + 16 * count:,} of its {count:,} pairs "
                                     "(truncated?): rerun its bucket element")
    return count


def pair_chunks(path: Path, run_id: str | None, chunk: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``path``'s pairs, ``chunk`` at a time, so a reader never holds a whole file. Checked
    first (``pair_count``)."""
    count = pair_count(path, run_id)
    with open(path, "rb") as handle:
        for start in range(0, count, chunk):
            size = min(chunk, count - start)
            sides = []
            for offset in (HEADER + 8 * start, HEADER + 8 * (count + start)):
                side = np.empty(size, dtype="<u8")
                handle.seek(offset)
                if handle.readinto(memoryview(side).cast("B")) != 8 * size:
                    raise CorruptCheckpointError(f"{path}: ended early: rerun its bucket element")
                sides.append(side.view(np.uint64))
            yield sides[0], sides[1]


def read_pairs(path: Path, run_id: str | None) -> tuple[np.ndarray, np.ndarray]:
    """All of ``path``'s pairs at once (for tests and small files)."""
    parts = list(pair_chunks(path, run_id, max(pair_count(path, run_id), 1)))
    if not parts:
        return np.empty(0, np.uint64), np.empty(0, np.uint64)
    return parts[0]


def _run(run_id: str | None) -> bytes:
    return (run_id or "").encode("ascii")[:16].ljust(16)

"""One shard's band keys, on disk, in numpy arrays only: a buckets element reads the rows of
one bucket and one band with two seeks and never imports pyarrow (its import alone would be
more than the element's work; docs/dedup.md).

    magic (8) | buckets (uint32) | bands (uint32) | rows (uint64)
    starts[buckets * bands + 1] (uint64)      the first row of each (bucket, band) and the end
    ids[rows] (uint64) | keys[rows] (uint64)  ordered by bucket, then band

all little-endian. ``BandFileWriter`` takes rows in batches of any order and writes them at
most ``flush_rows`` at a time to a spill file, then gathers each (bucket, band) into place.
A file that is too short, too long or not a band file is refused by name, never half-read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.atomic import replacing, temporary_sibling
from ..core.errors import CorruptCheckpointError

MAGIC = b"CABANDS2"
EARLIER_MAGIC = b"CABANDS1"  # before the MinHash hash functions became a * x + b mod 2^32
EARLIER_MINHASH = "its MinHash keys were made by an earlier release, whose hash functions differ from this one's"
HEADER = len(MAGIC) + 4 + 4 + 8


@dataclass(frozen=True)
class BandRows:
    """Band-key rows: document identity, band, key (equal keys in one band: a candidate pair)."""

    ids: np.ndarray
    bands: np.ndarray
    keys: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


class BandFileWriter:
    """Writes ``path`` (atomically, when the block ends without error) from batches of rows,
    holding at most about ``flush_rows`` of them."""

    def __init__(self, path: Path, buckets: int, bands: int, flush_rows: int):
        self.path, self.buckets, self.bands, self.flush_rows = Path(path), buckets, bands, flush_rows
        self.pending: list[BandRows] = []
        self.flushed: list[np.ndarray] = []  # each flush's rows per (bucket, band)

    def __enter__(self) -> BandFileWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.spill_path = temporary_sibling(self.path)
        self.spill = open(self.spill_path, "w+b")
        return self

    def add(self, rows: BandRows) -> None:
        self.pending.append(rows)
        if sum(map(len, self.pending)) >= self.flush_rows:
            self._flush()

    def _flush(self) -> None:
        ids, bands, keys = (np.concatenate([getattr(rows, name) for rows in self.pending])
                            for name in ("ids", "bands", "keys"))
        self.pending.clear()
        group = (keys % np.uint64(self.buckets)).astype(np.int64) * self.bands + bands.astype(np.int64)
        narrow = group.astype(np.uint16) if self.buckets * self.bands <= 1 << 16 else group
        order = np.argsort(narrow, kind="stable")  # 16-bit: numpy's radix sort, ~7x faster at 20 buckets
        self.flushed.append(np.bincount(group, minlength=self.buckets * self.bands))
        for column in (ids, keys):
            self.spill.write(np.ascontiguousarray(column[order], dtype="<u8").tobytes())

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is None:
                if self.pending:
                    self._flush()
                self._gather()
        finally:
            self.spill.close()
            self.spill_path.unlink(missing_ok=True)

    def _gather(self) -> None:
        """Each (bucket, band)'s rows from every flush, one after the other, into the file."""
        counts = np.array(self.flushed, dtype=np.int64).reshape(len(self.flushed), self.buckets * self.bands)
        totals = counts.sum(axis=0)
        starts = np.concatenate([[0], np.cumsum(totals)]).astype("<u8")
        rows = int(starts[-1])
        flush_rows = counts.sum(axis=1)
        flush_offsets = np.concatenate([[0], np.cumsum(2 * 8 * flush_rows)])  # ids then keys of each flush
        group_offsets = np.concatenate([np.zeros((len(counts), 1), np.int64), np.cumsum(counts, axis=1)], axis=1)
        self.spill.flush()
        with replacing(self.path) as partial, open(partial, "wb") as out:
            out.write(MAGIC + np.array([self.buckets, self.bands], "<u4").tobytes() + np.uint64(rows).tobytes())
            out.write(starts.tobytes())
            for column in (0, 1):
                for group in range(self.buckets * self.bands):
                    for flush in np.flatnonzero(counts[:, group]):
                        base = flush_offsets[flush] + 8 * column * flush_rows[flush]
                        out.write(os.pread(self.spill.fileno(), 8 * int(counts[flush, group]),
                                           int(base + 8 * group_offsets[flush, group])))


class BandFile:
    """A band file's layout, checked when opened; ``share`` reads one bucket's rows of one band.
    An earlier release's file is read only with ``minhash`` False: its exact-dedup keys are
    this release's, its MinHash keys are not."""

    def __init__(self, path: Path, minhash: bool = True):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as handle:
                header = handle.read(HEADER)
        except OSError as exc:
            raise self._corrupt(f"cannot read it ({exc.strerror})") from None
        if minhash and header[:len(EARLIER_MAGIC)] == EARLIER_MAGIC:
            raise self._corrupt(EARLIER_MINHASH)
        if len(header) < HEADER or header[:len(MAGIC)] not in (MAGIC, EARLIER_MAGIC):
            raise self._corrupt("not a band-key file")
        self.buckets, self.bands = (int(x) for x in np.frombuffer(header, "<u4", 2, len(MAGIC)))
        self.row_count = int(np.frombuffer(header, "<u8", 1, len(MAGIC) + 8)[0])
        self.groups = self.buckets * self.bands
        expected = HEADER + 8 * (self.groups + 1) + 16 * self.row_count
        if size != expected:
            raise self._corrupt(f"{size:,} bytes, not the {expected:,} of its {self.row_count:,} rows (truncated?)")

    def share(self, bucket: int, buckets: int, band: int) -> tuple[np.ndarray, np.ndarray]:
        """The identities and keys of ``bucket``'s rows of ``band``, in a run of ``buckets``
        buckets: one slice when the file was bucketed the same way, else the band's rows of
        every bucket, filtered (an earlier run's file, with its own count)."""
        with open(self.path, "rb") as handle:
            if buckets == self.buckets:
                first, last = (int(x) for x in self._read(handle, HEADER + 8 * (bucket * self.bands + band), 2))
                if not 0 <= first <= last <= self.row_count:
                    raise self._corrupt("its row index is out of order")
                return self._slice(handle, first, last)
            starts = self._read(handle, HEADER, self.groups + 1)
            parts = [self._slice(handle, int(starts[group]), int(starts[group + 1]))
                     for group in range(band, self.groups, self.bands)]
        ids, keys = (np.concatenate([part[side] for part in parts]) for side in (0, 1))
        return in_bucket(ids, keys, bucket, buckets)

    def _slice(self, handle, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
        data = HEADER + 8 * (self.groups + 1)
        return (self._read(handle, data + 8 * first, last - first),
                self._read(handle, data + 8 * (self.row_count + first), last - first))

    def _read(self, handle, offset: int, count: int) -> np.ndarray:
        values = np.empty(count, dtype="<u8")
        handle.seek(offset)
        if handle.readinto(memoryview(values).cast("B")) != 8 * count:
            raise self._corrupt("it ended early")
        return values.view(np.uint64)

    def _corrupt(self, why: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{self.path}: {why}: rerun its signatures element")


def in_bucket(ids: np.ndarray, keys: np.ndarray, bucket: int, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose key falls in ``bucket`` of ``buckets``."""
    mine = keys % np.uint64(buckets) == np.uint64(bucket)
    return ids[mine], keys[mine]

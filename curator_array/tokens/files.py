"""Token files: Megatron's indexed dataset and datatrove's ``.ds``, written, read and merged.

Both hold one stream of token ids (``uint16`` when the vocabulary fits, else 32 bits) and
the documents' boundaries:

* ``megatron``: ``PREFIX.bin`` (the ids) and ``PREFIX.idx``: the header ``MMIDIDX\\0\\0``,
  version 1 (uint64), the dtype code (uint8: 8 for uint16, 4 for int32), the sequence and
  document counts (uint64), each sequence's length (int32), its byte offset in ``.bin``
  (int64), and the document indices (int64, 0..n): one sequence per document, as
  Megatron-LM's ``IndexedDataset`` reads it.
* ``datatrove``: ``PREFIX.ds`` (the ids; ``uint32`` when wide) and ``PREFIX.ds.index``
  (each document's end, in tokens, uint64), as datatrove's ``DocumentTokenizer`` writes them.

Every file appears complete or not at all (written under a temporary name, synced,
renamed), the index last; the same documents give the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

import numpy as np

from ..core.atomic import replacing

MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}


@dataclass(frozen=True)
class Part:
    """One written file (pair): its name (without suffixes), documents, tokens and bytes."""

    name: str
    documents: int
    tokens: int
    bytes: int

    def to_json(self) -> dict[str, int | str]:
        return {"name": self.name, "documents": self.documents, "tokens": self.tokens, "bytes": self.bytes}


class TokenFormat:
    """One on-disk format. ``TokenWriter`` streams documents into a file of it; ``read``
    returns a file's documents' lengths and its ids (memory-mapped). ``data_args``: Megatron's
    ``--data-path`` reads its files by prefix (the run writes ``data_args.txt`` for them)."""

    name: ClassVar[str]
    data_suffix: ClassVar[str]
    index_suffix: ClassVar[str]
    data_args: ClassVar[bool] = False

    @staticmethod
    def dtype(wide: bool) -> np.dtype:
        raise NotImplementedError

    def write_index(self, handle: BinaryIO, lengths: np.ndarray, dtype: np.dtype) -> None:
        raise NotImplementedError

    def read_lengths(self, index: Path) -> tuple[np.ndarray, np.dtype]:
        raise NotImplementedError

    def paths(self, prefix: Path) -> tuple[Path, Path]:
        return prefix.with_name(prefix.name + self.data_suffix), prefix.with_name(prefix.name + self.index_suffix)

    def read(self, prefix: Path) -> tuple[np.ndarray, np.ndarray]:
        """(each document's length in tokens, every id) of the file at ``prefix``."""
        data, index = self.paths(prefix)
        lengths, dtype = self.read_lengths(index)
        ids = np.memmap(data, dtype=dtype, mode="r") if data.stat().st_size else np.zeros(0, dtype)
        return lengths, ids


class Megatron(TokenFormat):
    name = "megatron"
    data_suffix, index_suffix = ".bin", ".idx"
    data_args = True

    @staticmethod
    def dtype(wide: bool) -> np.dtype:
        return np.dtype(np.int32 if wide else np.uint16)

    def write_index(self, handle: BinaryIO, lengths: np.ndarray, dtype: np.dtype) -> None:
        count = len(lengths)
        pointers = np.zeros(count, dtype=np.int64)
        np.cumsum(lengths[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
        handle.write(MEGATRON_HEADER + struct.pack("<Q", 1) + struct.pack("<B", MEGATRON_DTYPE_CODES[dtype])
                     + struct.pack("<Q", count) + struct.pack("<Q", count + 1))
        handle.write(lengths.astype("<i4").tobytes())
        handle.write(pointers.astype("<i8").tobytes())
        handle.write(np.arange(count + 1, dtype="<i8").tobytes())

    def read_lengths(self, index: Path) -> tuple[np.ndarray, np.dtype]:
        raw = index.read_bytes()
        if raw[:9] != MEGATRON_HEADER:
            raise ValueError(f"{index}: not a Megatron index (header {raw[:9]!r})")
        code = raw[17]
        dtype = next(d for d, c in MEGATRON_DTYPE_CODES.items() if c == code)
        count = struct.unpack_from("<Q", raw, 18)[0]
        return np.frombuffer(raw, dtype="<i4", count=count, offset=34).astype(np.int64), dtype


class Datatrove(TokenFormat):
    name = "datatrove"
    data_suffix, index_suffix = ".ds", ".ds.index"

    @staticmethod
    def dtype(wide: bool) -> np.dtype:
        return np.dtype(np.uint32 if wide else np.uint16)

    def write_index(self, handle: BinaryIO, lengths: np.ndarray, dtype: np.dtype) -> None:
        handle.write(np.cumsum(lengths, dtype=np.uint64).astype("<u8").tobytes())

    def read_lengths(self, index: Path) -> tuple[np.ndarray, np.dtype]:
        ends = np.fromfile(index, dtype="<u8").astype(np.int64)
        data = index.with_name(index.name.removesuffix(self.index_suffix) + self.data_suffix)
        tokens = int(ends[-1]) if len(ends) else 0
        itemsize = data.stat().st_size // tokens if tokens else 2
        return np.diff(ends, prepend=0), np.dtype(np.uint16 if itemsize == 2 else np.uint32)


TOKEN_FORMATS: dict[str, TokenFormat] = {fmt.name: fmt for fmt in (Megatron(), Datatrove())}


class TokenWriter:
    """Documents into one file of ``fmt`` at ``prefix``, streamed; the pair appears when the
    ``with`` block ends without an error, the index last, and not at all otherwise."""

    def __init__(self, fmt: TokenFormat, prefix: Path, dtype: np.dtype):
        self.fmt, self.prefix, self.dtype = fmt, prefix, dtype
        self.lengths: list[np.ndarray] = []
        self.tokens = 0
        self._stack = ExitStack()

    def __enter__(self) -> TokenWriter:
        data, index = self.fmt.paths(self.prefix)
        data.parent.mkdir(parents=True, exist_ok=True)
        self._index_partial = self._stack.enter_context(replacing(index))  # renamed last: entered first
        self._data = self._stack.enter_context(open(self._stack.enter_context(replacing(data)), "wb"))
        return self

    def add(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Documents whose ids, one after the other, are ``ids`` and whose lengths are ``lengths``."""
        self._data.write(np.ascontiguousarray(ids, dtype=self.dtype.newbyteorder("<")).tobytes())
        self.lengths.append(np.asarray(lengths, dtype=np.int64))
        self.tokens += int(len(ids))

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self._data.flush()
            lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
            with open(self._index_partial, "wb") as handle:
                self.fmt.write_index(handle, lengths, self.dtype)
        self._stack.__exit__(kind, value, traceback)

    @property
    def documents(self) -> int:
        return sum(len(part) for part in self.lengths)


def merge(fmt: TokenFormat, inputs: Sequence[Path], directory: Path, file_size: int,
          stem: str = "part") -> list[Part]:
    """The documents of ``inputs`` (files of ``fmt``), in order, into files of at most
    ``file_size`` bytes of ids each (a larger document gets a file of its own), named
    ``<stem>-00000`` and so on. Removes parts a previous merge left beyond the last."""
    parts: list[Part] = []
    pending: list[tuple[np.ndarray, np.ndarray]] = []  # (ids, lengths) ranges for the next part
    pending_bytes, dtype = 0, None

    def flush() -> None:
        nonlocal pending_bytes
        name = f"{stem}-{len(parts):05d}"
        with TokenWriter(fmt, directory / name, dtype) as writer:
            for ids, lengths in pending:
                writer.add(ids, lengths)
        parts.append(Part(name, writer.documents, writer.tokens, writer.tokens * dtype.itemsize))
        pending.clear()
        pending_bytes = 0

    for path in inputs:
        lengths, ids = fmt.read(path)
        dtype = dtype or ids.dtype
        starts = np.concatenate([[0], np.cumsum(lengths)])
        for first, last in _ranges(lengths, ids.dtype.itemsize, file_size, pending_bytes):
            if first is None:
                flush()
                continue
            pending.append((ids[starts[first]:starts[last]], lengths[first:last]))
            pending_bytes += int(starts[last] - starts[first]) * ids.dtype.itemsize
    if pending:
        flush()
    for stale in directory.glob(f"{stem}-*"):
        if stale.name.split(".")[0] not in {part.name for part in parts}:
            stale.unlink()
    return parts


def merge_by_keys(fmt: TokenFormat, inputs: Sequence[Path], keys: Sequence[np.ndarray], directory: Path,
                  file_size: int, stem: str = "part") -> list[Part]:
    """The documents of ``inputs`` in the order of their ``keys`` (one uint64 per document of
    each input), into files of at most ``file_size`` bytes of ids each, as ``merge`` names
    them. Memory: the documents' keys, lengths and places (about 40 bytes a document); the
    ids are read from the memory-mapped inputs a document at a time, never all at once."""
    read = [fmt.read(path) for path in inputs]
    if not read:
        return merge(fmt, [], directory, file_size, stem)
    lengths = np.concatenate([found[0] for found in read])
    starts = np.concatenate([np.concatenate([[0], np.cumsum(found[0])[:-1]]).astype(np.int64) for found in read])
    source = np.concatenate([np.full(len(found[0]), n, np.int32) for n, found in enumerate(read)])
    order = np.argsort(np.concatenate(keys).astype(np.uint64), kind="stable")
    dtype = read[0][1].dtype
    parts: list[Part] = []
    writer: TokenWriter | None = None
    used = 0
    try:
        for document in order.tolist():
            size = int(lengths[document]) * dtype.itemsize
            if writer is not None and used and used + size > file_size:
                writer.__exit__(None, None, None)
                parts.append(Part(writer.prefix.name, writer.documents, writer.tokens, writer.tokens * dtype.itemsize))
                writer, used = None, 0
            if writer is None:
                writer = TokenWriter(fmt, directory / f"{stem}-{len(parts):05d}", dtype).__enter__()
            ids = read[source[document]][1]
            start = int(starts[document])
            writer.add(ids[start:start + int(lengths[document])], lengths[document:document + 1])
            used += size
        if writer is not None:
            writer.__exit__(None, None, None)
            parts.append(Part(writer.prefix.name, writer.documents, writer.tokens, writer.tokens * dtype.itemsize))
            writer = None
    finally:
        if writer is not None:
            writer.__exit__(RuntimeError, RuntimeError("merge stopped"), None)
    for stale in directory.glob(f"{stem}-*"):
        if stale.name.split(".")[0] not in {part.name for part in parts}:
            stale.unlink()
    return parts


def _ranges(lengths: np.ndarray, itemsize: int, limit: int, used: int) -> Iterator[tuple[int | None, int | None]]:
    """Document ranges [first, last) of one input to add to the current part, with
    ``(None, None)`` wherever the current part is full and a new one starts."""
    sizes = lengths * itemsize
    first = 0
    while first < len(sizes):
        room = limit - used
        fits = np.searchsorted(np.cumsum(sizes[first:]), room, side="right")
        if fits == 0:
            if used:  # the next document does not fit: close the part
                yield None, None
                used = 0
                continue
            fits = 1  # alone, and too large: a part of its own
        yield first, first + fits
        used += int(sizes[first:first + fits].sum())
        first += fits

"""A loaded model's large matrices moved onto transparent huge pages, once it has worked long
enough to repay the move.

A fastText model of DCLM's shape is an 800 MB matrix read at random, a row per word and
bigram of every document: on 4 KiB pages nearly every row costs a TLB miss. On 2 MiB pages
the same loop scored a page in 49–57 µs instead of 58–89 µs (one process, the same 80,000
documents, runs in turn; the spread on small pages is other tenants' load). Linux backs
memory with huge pages only where asked (``madvise``, the usual default) and fastText does
not ask, so the regions a load mapped are collapsed in place (``MADV_COLLAPSE``, Linux 6.1):
a copy of the model's bytes, 0.2 s for 775 MiB where the memory was used before, up to 2.4 s
where a VM first backs it. A short shard never earns that back, so the move waits until the
process has scored for ``MOVE_AFTER_S``: by then small pages have cost about what moving
costs (the rule of renting until the rent paid equals the price), and a long shard keeps
nearly all of the gain.

Anywhere that cannot (another OS, an older kernel, THP turned off, no huge page free) the
model stays where it is, as fast as fastText alone makes it. (numpy's arrays ask for huge pages
themselves, as they are made: ``run.huge_pages``.)
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAPS = Path("/proc/self/maps")
HUGE_PAGE = 2 << 20
LARGE = 32 << 20  # regions smaller than this are a model's dictionary or less: not worth a copy
MOVE_AFTER_S = 10.0
MADV_COLLAPSE = 25


def _anonymous_regions() -> set[tuple[int, int]] | None:
    """The process's private, writable mappings of no file, where malloc puts large arrays (in
    a mapping of their own, or in its heap once its threshold has grown); None without /proc."""
    try:
        lines = MAPS.read_text().splitlines()
    except OSError:
        return None
    regions = set()
    for line in lines:
        fields = line.split()
        anonymous = len(fields) == 5 or fields[5:] == ["[heap]"]  # malloc's large blocks, or its heap grown
        if anonymous and fields[1].startswith("rw") and fields[1].endswith("p"):
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            regions.add((start, end))
    return regions


def new_ranges(before: set[tuple[int, int]], after: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """The address ranges mapped in ``after`` and not in ``before``. The kernel merges a new
    mapping into a neighbour of the same kind, so a region of ``after`` may hold old memory too."""
    pieces = []
    for start, end in sorted(after):
        cursor = start
        for low, high in sorted(before):
            if high <= cursor or low >= end:
                continue
            if low > cursor:
                pieces.append((cursor, low))
            cursor = max(cursor, high)
        if cursor < end:
            pieces.append((cursor, end))
    return pieces


@cache
def _madvise():
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return madvise


def _collapse(start: int, end: int) -> int:
    """Collapse the whole huge pages inside [start, end); the bytes now on them, 0 if refused."""
    first = -(-start // HUGE_PAGE) * HUGE_PAGE
    last = end // HUGE_PAGE * HUGE_PAGE
    if last <= first:
        return 0
    if _madvise()(first, last - first, MADV_COLLAPSE) != 0:
        logger.debug("huge pages refused for %d MiB (errno %d)", (last - first) >> 20, ctypes.get_errno())
        return 0
    return last - first


class LargeRegions:
    """The large regions this process's model loads mapped (``load``), moved onto huge pages
    once scoring (``scoring``) has taken ``MOVE_AFTER_S`` in all."""

    def __init__(self) -> None:
        self.waiting: set[tuple[int, int]] = set()
        self.scoring_s = 0.0

    def load(self, load: Callable[[], T]) -> T:
        before = _anonymous_regions()
        loaded = load()
        if before is not None:
            self.waiting |= {(start, end) for start, end in new_ranges(before, _anonymous_regions() or set())
                             if end - start >= LARGE}
        return loaded

    @contextmanager
    def scoring(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.scoring_s += time.perf_counter() - started
            if self.waiting and self.scoring_s >= MOVE_AFTER_S:
                self._move()

    def _move(self) -> None:
        """Collapse the waiting regions that are still mapped (a model loaded only to be
        checked, then freed, left its region to whatever came next)."""
        mapped = _anonymous_regions() or set()
        moved = sum(_collapse(start, end) for start, end in self.waiting
                    if any(low <= start and end <= high for low, high in mapped))
        self.waiting.clear()
        if moved:
            logger.debug("models on huge pages: %d MiB", moved >> 20)


MODELS = LargeRegions()  # one per process, as the models are

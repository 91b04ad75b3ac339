"""numpy's huge-page advice, per phase (``Phase.huge_pages``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

HUGE_PAGE_ADVICE = "NUMPY_MADVISE_HUGEPAGE"


@contextmanager
def huge_page_advice(wanted: bool) -> Iterator[None]:
    """numpy asks the kernel to back each array of 4 MB or more with huge pages, which pays
    for random access (the clusters element is 12% slower without). Where the kernel must
    compact memory at the first touch (``transparent_hugepage/defrag`` set to ``madvise``,
    the default of many distributions) and the page cache fills the rest of the memory, as
    on a node that has read a lot, each fresh array stalls instead: the paragraph buckets
    phase, fresh arrays of GBs, took 8.3 s instead of 11.3 s on a million paragraphs
    without the advice (docs/dedup.md). While the block runs, numpy advises huge pages as
    ``wanted`` (the processes started in it inherit the choice); ``NUMPY_MADVISE_HUGEPAGE``
    set by the user wins."""
    if wanted or HUGE_PAGE_ADVICE in os.environ:
        yield
        return
    from numpy._core import multiarray  # numpy's own switch behind the variable

    os.environ[HUGE_PAGE_ADVICE] = "0"
    before = multiarray._set_madvise_hugepage(False)
    try:
        yield
    finally:
        multiarray._set_madvise_hugepage(before)
        os.environ.pop(HUGE_PAGE_ADVICE, None)

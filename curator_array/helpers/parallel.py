"""Work spread over the CPUs an element was given, with results in the order of the work.

A phase element that is file work (dedup's signatures, say) runs in one process; on a node
granted 64 CPUs it would use one. ``ordered_map`` hands its items to worker processes and
gives the results back in the items' order, so what the element writes is the same bytes
whatever the number of workers. At most ``workers * AHEAD`` items are in flight, so memory
grows with the workers, not with the input.

Workers are forked when this process never loaded Ray (a phase element in an array: no Ray
there), so they start in milliseconds with the element's modules already imported; spawning
costs each worker about 0.35 s of imports (numpy, pyarrow, and pandas, which pyarrow loads
on its first conversion). A process that loaded Ray (a run outside an array goes on from its
curation shards to the later phases) may hold a driver's threads, which a fork copies in a
broken state: there workers are spawned. Arrow resets its own thread pools in a forked child.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
AHEAD = 2  # items in flight per worker: one being worked on, one waiting


def ordered_map(function: Callable[[Item], Result], items: Iterable[Item], workers: int) -> Iterator[Result]:
    """``function(item)`` for each item, in order, over ``workers`` processes (in this one
    when ``workers`` is 1). ``function`` must be importable by name (a module's function,
    or a ``functools.partial`` of one)."""
    if workers <= 1:
        yield from map(function, items)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(start_method())) as pool:
        pending: deque[Future] = deque()
        try:
            for item in items:
                pending.append(pool.submit(function, item))
                if len(pending) >= workers * AHEAD:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def start_method() -> str:
    """How worker processes start: forked unless this process loaded Ray (module docstring)."""
    return "spawn" if "ray" in sys.modules else "fork"


def granted_cpus(*granted: int | None) -> int:
    """The CPUs this element may use: the first of ``granted`` that is set (``--num-cpus``, then
    what SLURM granted the job on this node), never more than the process's affinity mask
    allows, which is all the element has outside SLURM."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    chosen = next((count for count in granted if count), None)
    return max(1, min(chosen, allowed)) if chosen else allowed

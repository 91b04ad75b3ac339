"""Run an extraction function on one page at a time in a child process, with a deadline.

Some pages make HTML extractors hang for minutes or crash inside compiled code. FineWeb gave
each page one second in a child process and restarted the child when a page overran; we do the
same, so a bad page costs its deadline and is counted, and the worker (a Ray actor holding a
whole shard's progress) never stalls or dies with it.

The child comes from a fork server (``multiprocessing``'s ``forkserver``): forking a Ray worker
itself would copy its threads' locks, while the fork server is a plain single-threaded process
that has imported the extractor once, so a restart after a timeout costs a fork, not an import.
The child is ours alone: it is killed by its pid, and it ends by itself when its parent does
(its pipe closes). The fork server starts on mimalloc (``helpers.allocator``, unless the run asks for the system's), so its children
extract on it too: trafilatura takes 8% less CPU.
"""

from __future__ import annotations

import importlib
import multiprocessing
import time
from collections.abc import Callable
from enum import Enum
from multiprocessing.connection import Connection

from ...helpers.allocator import MIMALLOC, helpers_started_on

# A fresh child may need to import the extractor (first start of the fork server).
START_TIMEOUT_S = 120.0


class Outcome(Enum):
    DONE = "done"
    TIMEOUT = "timeout"
    ERROR = "error"  # the extractor raised, or its process died (a crash, the OOM killer)


def resolve(reference: str) -> Callable[[str], str]:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


# A page every extractor can take, for the child's first call.
WARM_UP_PAGE = "<html><body><p>Warm-up.</p></body></html>"


def _warm_up(extract: Callable[[str], str], forget_all: Callable[[], None]) -> None:
    """A new child's first call pays the extractor's lazy imports and set-up (0.2 to 0.4 s for
    trafilatura, more on a loaded host): paid before the child says it is ready, within the
    start's time limit, never out of a page's deadline."""
    try:
        extract(WARM_UP_PAGE)
    except Exception:  # noqa: BLE001 - a function that refuses this page is still started
        pass
    forget_all()


def _serve(connection: Connection, reference: str, forget: str | None) -> None:
    extract = resolve(reference)
    forget_all = resolve(forget) if forget else (lambda: None)
    _warm_up(extract, forget_all)
    connection.send(time.process_time())
    while True:
        try:
            html = connection.recv()
        except EOFError:
            return
        try:
            result = (True, extract(html) if html is not None else forget_all())
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which counts it
            result = (False, f"{type(exc).__name__}: {exc}")
        connection.send((*result, time.process_time()))


class ExtractionSandbox:
    """Calls the function named ``reference`` (``module:function``) in a child process;
    ``preload`` names modules the fork server imports beforehand (the extractor's library).

    ``extract(html)`` returns ``(Outcome, text)``; on a timeout or a dead child the child is
    replaced before the next page. ``forget()`` calls the function named ``forget`` in the
    child: an extractor that remembers pages (trafilatura's ``deduplicate``) starts afresh.
    ``child_cpu_s`` is the CPU time its children have used, as each last reported it.
    """

    def __init__(self, reference: str, timeout_s: float, forget: str | None = None, preload: tuple[str, ...] = (),
                 allocator: str = MIMALLOC):
        self.reference, self.timeout_s, self.forget_reference = reference, timeout_s, forget
        self.allocator = allocator
        self._context = multiprocessing.get_context("forkserver")
        # The library too, when the function imports it lazily: a restart is then only a fork.
        self._context.set_forkserver_preload(sorted({reference.partition(":")[0], *preload}))
        self._process = None
        self._connection: Connection | None = None
        self._ended_children_cpu_s = self._child_cpu_s = 0.0

    @property
    def child_cpu_s(self) -> float:
        return self._ended_children_cpu_s + self._child_cpu_s

    def _start(self) -> None:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(theirs, self.reference, self.forget_reference),
                                        daemon=True,
                                        name="curator-array-extract")
        with helpers_started_on(self.allocator, "extracting pages"):  # the fork server starts with the first child
            process.start()
        theirs.close()
        self._process, self._connection = process, ours
        try:
            if not ours.poll(START_TIMEOUT_S):
                raise EOFError(f"no answer within {START_TIMEOUT_S:.0f} s")
            self._child_cpu_s = ours.recv()
        except EOFError as exc:
            self.close()
            raise RuntimeError(f"the extraction process for {self.reference} did not start ({exc or 'it died'})") \
                from None

    def forget(self) -> None:
        """A fresh child remembers nothing; a live one is told to forget (a timeout replaces it)."""
        if self.forget_reference and self._process is not None:
            self._call(None)

    def extract(self, html: str) -> tuple[Outcome, str]:
        return self._call(html)

    def _call(self, html: str | None) -> tuple[Outcome, str]:
        if self._process is None or not self._process.is_alive():
            self.close()
            self._start()
        try:
            self._connection.send(html)
            deadline = time.monotonic() + self.timeout_s
            while not self._connection.poll(min(0.5, max(0.0, deadline - time.monotonic()))):
                if not self._process.is_alive():
                    self.close()
                    return Outcome.ERROR, ""
                if time.monotonic() >= deadline:
                    self.close()
                    return Outcome.TIMEOUT, ""
            ok, result, self._child_cpu_s = self._connection.recv()
        except (EOFError, OSError, BrokenPipeError):
            self.close()
            return Outcome.ERROR, ""
        return (Outcome.DONE, result or "") if ok else (Outcome.ERROR, "")

    def close(self) -> None:
        """Ends the child (ours, by its pid) and forgets it."""
        self._ended_children_cpu_s += self._child_cpu_s
        self._child_cpu_s = 0.0
        if self._connection is not None:
            self._connection.close()
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(timeout=5)
        self._process = self._connection = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

"""Encoding in a child process of its own, on mimalloc.

``tokenizers`` spends about a third of its time in glibc's ``malloc`` and ``free`` (one
allocation per token and per piece of text); with mimalloc preloaded the same encoding
takes a quarter to a third less time and gives the same ids. An allocator is chosen when a process
starts, so the tokenize element hands its batches to a child started with mimalloc (from
the ``cmeel-mimalloc`` wheel) in ``LD_PRELOAD`` (``helpers.allocator``), and the rest of the
run keeps its own allocator and memory.

The child ignores SIGINT and SIGTERM: its parent decides when it ends, by closing the pipe
(it finishes the batch in hand and exits), so a stopped or killed element leaves no
encoder behind and the child never outlives its parent by more than a batch.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from ..core.errors import ConfigError
from ..helpers.allocator import MIMALLOC, helper_environment

if TYPE_CHECKING:
    import numpy as np


class EncoderFailed(RuntimeError):
    """The encoding process failed or ended before answering."""


class EncoderProcess:
    """A child that encodes batches of texts: ``documents(texts)`` and ``lengths(texts)``
    return what the tokenizer's own methods of those names return, byte for byte.

    Use as a context manager, or ``shared_encoder`` for one that lives as long as this
    process. ``wide``: whether its ids need 32 bits; ``child_cpu_s``: the CPU time the
    child has used, as it last reported (its threads included).
    """

    def __init__(self, tokenizer: str, eos_token: str | None, environ: Mapping[str, str] = os.environ,
                 allocator: str = MIMALLOC):
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, tokenizer, eos_token or ""],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=helper_environment(environ, "tokenizing", allocator))
        self.requests = Connection(os.dup(self.process.stdin.fileno()), readable=False)
        self.answers = Connection(os.dup(self.process.stdout.fileno()), writable=False)
        self.process.stdin.close()
        self.process.stdout.close()
        self.child_cpu_s = 0.0
        try:
            self.wide: bool = self._answer("ready")  # its signals are set and its tokenizer loaded
        except EncoderFailed:
            self.close()
            raise

    def documents(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return self._ask("documents", texts)

    def lengths(self, texts: list[str]) -> np.ndarray:
        return self._ask("lengths", texts)

    def _ask(self, method: str, texts: list[str]):
        try:
            self.requests.send((method, texts))
        except OSError:
            pass  # it ended: its answer says why
        return self._answer(method)

    def _answer(self, expected: str):
        try:
            kind, answer, self.child_cpu_s = self.answers.recv()
        except (EOFError, OSError):
            raise EncoderFailed(f"the tokenizer's process ended (exit code {self.process.wait()})") from None
        if kind != expected:
            raise EncoderFailed(f"the tokenizer's process failed: {answer}")
        return answer

    def close(self) -> None:
        self.requests.close()  # the child ends after the batch in hand
        self.answers.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> EncoderProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def shared_encoder(tokenizer: str, eos_token: str | None, allocator: str = MIMALLOC) -> EncoderProcess:
    """This process's encoder for ``tokenizer``, started on first use and closed at exit: a
    stage in a Ray worker calls it batch after batch. A forked process starts its own (the
    pipes it inherited are its parent's); a failed encoder is replaced on the next call."""
    global _REPLACED_CPU_S
    key = (os.getpid(), tokenizer, eos_token)
    encoder = _SHARED.get(key)
    if encoder is None or encoder.process.poll() is not None:
        _REPLACED_CPU_S += encoder.child_cpu_s if encoder is not None else 0.0
        encoder = _SHARED[key] = EncoderProcess(tokenizer, eos_token, allocator=allocator)
        atexit.register(encoder.close)
    return encoder


def shared_encoders_cpu_s() -> float:
    """The CPU time this process's shared encoders have used (a stage's ``cpu_elsewhere_s``)."""
    pid = os.getpid()
    return _REPLACED_CPU_S + sum(e.child_cpu_s for (owner, *_), e in _SHARED.items() if owner == pid)


_SHARED: dict[tuple[int, str, str | None], EncoderProcess] = {}
_REPLACED_CPU_S = 0.0
METHODS = ("documents", "lengths")


def serve(tokenizer_path: str, eos_token: str | None) -> int:
    """The child: ``("ready", wide)`` once it can encode, then for each ``(method, texts)``
    in, ``(method, what the tokenizer's method returns)`` out; ``("error", text)`` when it
    cannot go on. Each answer carries the child's CPU time so far as its third item."""
    from .tokenizer import load_tokenizer

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    answers = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # what a library prints must not reach the pipe
    requests = Connection(0, writable=False)
    try:
        tokenizer = load_tokenizer(tokenizer_path, eos_token)
    except ConfigError as exc:
        answers.send(("error", str(exc), time.process_time()))
        return 2
    answers.send(("ready", tokenizer.wide, time.process_time()))
    while True:
        try:
            method, texts = requests.recv()
        except EOFError:
            return 0
        try:
            if method not in METHODS:
                raise ValueError(f"no method {method!r}")
            answers.send((method, getattr(tokenizer, method)(texts), time.process_time()))
        except Exception as exc:  # noqa: BLE001 - the parent reports it
            answers.send(("error", f"{type(exc).__name__}: {exc}", time.process_time()))
            return 1


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], sys.argv[2] or None))

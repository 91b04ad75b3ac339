"""``curator-array ARGS`` in the test process, on the Ray cluster it is already connected to.

A run in its own process starts a private Ray cluster, whose driver and workers each import
Ray Data again: about 7 CPU-seconds for a run of the sample data, which takes 0.3 s once
that is done. Most tests check what a run writes and says, not how it starts its cluster;
they run here on one cluster per test module, whose workers stay warm. The tests of the
cluster's own life (its start, its options, a stop by a signal, a node's memory, variables
its workers read) keep using ``tests.conftest.curator_cli``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from unittest import mock

from curator_array.cli.group import LOG_FORMAT
from curator_array.execution.clients import RayClusterClient


class AlreadyConnected(RayClusterClient):
    """The cluster this process is already connected to: nothing to start or stop."""

    def launch(self) -> None:
        pass

    def _start(self) -> None:
        pass

    def stop(self, keep_logs: bool = False) -> None:
        pass


@contextlib.contextmanager
def _output() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """stdout and stderr as the command prints them, its log lines on stderr as the CLI formats
    them; then what reached descriptor 2 itself (Ray's C++ core writes there)."""
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as descriptor_2:
        os.dup2(descriptor_2.fileno(), 2)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield out, err
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            root.removeHandler(handler)
            descriptor_2.seek(0)
            err.write(descriptor_2.read().decode("utf-8", "replace"))


def curator_in_process(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """What ``curator-array ARGS`` returns and prints, run here with ``env`` added to the environment."""
    from curator_array.cli import main

    with mock.patch.dict(os.environ, env or {}), _output() as (out, err), \
            mock.patch("curator_array.run.shard.make_client", lambda *_a, **_k: AlreadyConnected()):
        code = main(list(args))
    return subprocess.CompletedProcess(["curator-array", *args], code, out.getvalue(), err.getvalue())

"""The driver's standard error filter drops Ray's known non-errors by their whole message,
and nothing else, even when the process dies inside it."""

from __future__ import annotations

import subprocess
import sys

NOTICE = ("[2026-12-05 08:03:26,910 E 29149 29149] core_worker.cc:2465: Actor with class name: "
          "'MapWorker(MapBatches(quality_model->jsonl_writer->record))' and ID: '0eca9438eb3cb9b0d2a4d27901000000' "
          "has constructor arguments in the object store and max_restarts > 0. If the arguments in the object store "
          "go out of scope or are lost, the actor restart will fail. See https://github.com/ray-project/ray/issues/53727 "
          "for more details.")
PROGRAM = r"""
import os, sys
from curator_array.execution.quiet_stderr import quiet_stderr
lines = sys.argv[1:]
with quiet_stderr():
    for line in lines:
        os.write(2, (line + "\n").encode())
    print("from python's own stderr", file=sys.stderr, flush=True)
    if lines[-1] == "crash":
        os._exit(9)
os.write(2, b"after the filter\n")
"""


def run(*lines: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM, *lines], capture_output=True, text=True, timeout=30)


def test_only_the_whole_known_message_is_dropped():
    other_error = NOTICE.replace("max_restarts > 0", "max_restarts > 1")
    done = run("first", NOTICE, other_error, NOTICE + " and more", "last")
    assert done.returncode == 0
    assert done.stderr.splitlines() == ["first", other_error, NOTICE + " and more", "last",
                                        "from python's own stderr", "after the filter"]


def test_what_a_dying_process_wrote_still_arrives():
    done = run("written just before", NOTICE, "crash")
    assert done.returncode == 9
    assert done.stderr.splitlines() == ["written just before", "crash", "from python's own stderr"]

"""End a command's process as the interpreter would, minus its teardown.

After a run the interpreter spends about 0.6 s of one core freeing what Ray, pyarrow and
the stages' modules hold (the selection element at 128,000 documents, three runs in turn:
manifest to exit 1.01–1.15 s with it, 0.39–0.54 s without), while the job's other core has
nothing left to do. Nothing the user keeps is written then: the manifest, the outputs and
the logs are closed before. So a command's process does what ``Py_FinalizeEx`` does first,
in its order, and then ends:

1. wait for the threads that are not daemons, and run what was registered to run then
   (``concurrent.futures`` shuts its pools down there);
2. run the ``atexit`` handlers: logging's flush and close, Ray's, multiprocessing's,
   ``weakref.finalize`` objects, temporary directories;
3. flush stdout and stderr, and exit with the command's code.

Only the ``__main__`` of a command calls this: a caller of ``cli.main`` in its own process
(a test, a notebook) keeps its interpreter.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_process(code: int) -> NoReturn:
    """Exit with ``code`` after the interpreter's own exit steps (see the module doc); where
    this Python lacks one of them, exit the usual way."""
    wait_for_threads = getattr(threading, "_shutdown", None)
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if wait_for_threads is None or run_exit_handlers is None:
        sys.exit(code)
    wait_for_threads()
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, a broken pipe, or no stream at all
            pass
    os._exit(code)

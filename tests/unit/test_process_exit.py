"""A command's process ends without the interpreter's teardown, and loses nothing by it:
threads that are not daemons finish, ``atexit`` handlers and thread-pool shutdowns run,
buffered output is written, and the exit code is the command's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from curator_array.cli import console

SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    from curator_array.cli.process_exit import exit_process

    out = Path(sys.argv[1])

    def late_writer():
        time.sleep(0.3)
        (out / "thread").write_text("finished")

    class Teardown:  # alive until the interpreter frees it: never, after os._exit
        def __del__(self):
            (out / "teardown").write_text("ran")

    keep = Teardown()
    threading.Thread(target=late_writer).start()
    pool = ThreadPoolExecutor(1)
    pool.submit(lambda: (time.sleep(0.2), (out / "pool").write_text("done")))
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    sys.stdout.write("buffered, no newline")
    exit_process(int(sys.argv[2]))
""")


def run(tmp_path: Path, code: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(code)], capture_output=True, text=True,
                          timeout=60)


def test_exit_keeps_the_interpreters_exit_steps_and_skips_its_teardown(tmp_path):
    done = run(tmp_path, 3)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered, no newline"
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "pool").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "teardown").exists()  # the teardown is what is skipped


def test_exit_code_zero(tmp_path):
    assert run(tmp_path, 0).returncode == 0


def test_the_command_line_exits_with_its_code(tmp_path):
    """Each way in (``python -m``, the console script's function) ends with the command's code."""
    missing = tmp_path / "missing"
    for command in ([sys.executable, "-m", "curator_array.cli"],
                    [sys.executable, "-c", f"from {console.__module__} import console; console()"]):
        assert subprocess.run([*command, "--version"], capture_output=True, timeout=120).returncode == 0
        refused = subprocess.run([*command, "status", "--checkpoint-path", str(missing)], capture_output=True,
                                 text=True, timeout=120)
        assert refused.returncode == 2
        assert refused.stderr.startswith("curator-array: error: no run configuration")

"""The helpers that do the heaviest library work (the tokenize encoder, the extraction
sandbox) run on mimalloc unless the run says otherwise (``--allocator system``, or
``CURATOR_ARRAY_ALLOCATOR``); nothing else changes allocator."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from curator_array.helpers import allocator
from curator_array.helpers.allocator import bundled_mimalloc, helper_environment
from curator_array.run.option_table import option_named

ALLOCATOR_VARIABLE = option_named("allocator").variable

# A fresh Python: multiprocessing's fork server is one per process, started with the first child.
SANDBOX_CHILD = """
import json, os, sys
from curator_array.stages.web.sandbox import ExtractionSandbox
sandbox = ExtractionSandbox("curator_array.stages.web.extract:fineweb_text", timeout_s=30, allocator=sys.argv[1])
outcome, text = sandbox.extract("<html><body><article><p>" + "A sentence about rivers. " * 30 + "</p></article>")
maps = open(f"/proc/{sandbox._process.pid}/maps").read()
print(json.dumps({"outcome": outcome.value, "text": bool(text), "mimalloc": "libmimalloc" in maps,
                  "preload_after": os.environ.get("LD_PRELOAD")}))
sandbox.close()
"""


def sandbox_child(allocator: str = "mimalloc") -> dict:
    pytest.importorskip("trafilatura")
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", ALLOCATOR_VARIABLE)}
    done = subprocess.run([sys.executable, "-c", SANDBOX_CHILD, allocator], env=environ, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_extraction_children_run_on_mimalloc_and_the_worker_keeps_its_allocator():
    assert bundled_mimalloc() is not None, "cmeel-mimalloc (a dependency of the web extra) is not installed"
    seen = sandbox_child()
    assert seen == {"outcome": "done", "text": True, "mimalloc": True, "preload_after": None}


def test_the_system_allocator_when_asked():
    assert sandbox_child("system")["mimalloc"] is False
    assert "LD_PRELOAD" not in helper_environment({"PATH": "/usr/bin"}, "tokenizing", "system")


def test_what_the_user_preloads_is_kept():
    own_allocator = {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}
    assert helper_environment(own_allocator, "tokenizing")["LD_PRELOAD"] == "/usr/lib/libjemalloc.so.2"
    profiler = {"LD_PRELOAD": "/opt/xalt/libxalt_init.so"}
    assert helper_environment(profiler, "tokenizing")["LD_PRELOAD"] == f"{bundled_mimalloc()}:/opt/xalt/libxalt_init.so"


def test_a_mimalloc_that_cannot_load_here_leaves_the_system_allocator(tmp_path, monkeypatch, caplog):
    """As in a slim image without libatomic.so.1: every start with it preloaded would fail."""
    broken = tmp_path / "libmimalloc.so.3"
    broken.write_bytes(b"not a library")
    monkeypatch.setattr(allocator, "bundled_mimalloc", lambda: str(broken))
    assert allocator.cannot_preload(bundled_mimalloc()) is None
    with caplog.at_level("WARNING", logger=allocator.__name__):
        assert "LD_PRELOAD" not in helper_environment({"PATH": "/usr/bin"}, "extracting pages")
    assert "extracting pages on the system allocator: mimalloc cannot load here" in caplog.text
    assert "cannot be preloaded" in caplog.text


def test_the_environment_is_restored_after_starting_helpers(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/opt/xalt/libxalt_init.so")
    with allocator.helpers_started_on("mimalloc", "extracting pages"):
        assert os.environ["LD_PRELOAD"] == f"{bundled_mimalloc()}:/opt/xalt/libxalt_init.so"
    assert os.environ["LD_PRELOAD"] == "/opt/xalt/libxalt_init.so"
    monkeypatch.delenv("LD_PRELOAD")
    with pytest.raises(RuntimeError), allocator.helpers_started_on("mimalloc", "extracting pages"):
        raise RuntimeError("a start that failed")
    assert "LD_PRELOAD" not in os.environ


def test_a_wrong_choice_stops_run_before_any_work(tmp_path, monkeypatch, capsys):
    from curator_array.cli import main
    from tests.conftest import REPO

    monkeypatch.setenv(ALLOCATOR_VARIABLE, "jemalloc")
    code = main(["run", "--input-dir", str(REPO / "sample_data" / "jsonl"), "--output-dir", str(tmp_path / "out")])
    assert code == 2
    assert f"{ALLOCATOR_VARIABLE}='jemalloc' from the environment: not one of mimalloc, system" in \
        capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_submit_refuses_a_wrong_choice_from_the_sites_env(tmp_path, monkeypatch, capsys):
    """The site's [env] beats the caller's environment in the job script, so it is what counts."""
    import shutil

    from curator_array.cli import main
    from tests.conftest import REPO

    sites = tmp_path / "sites"
    shutil.copytree(REPO / "site_configs", sites)
    with open(sites / "local.toml", "a") as site:
        site.write(f'\n[env]\n{ALLOCATOR_VARIABLE} = "tcmalloc"\n')
    monkeypatch.setenv(ALLOCATOR_VARIABLE, "system")
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path / "out"))
    submit = ["submit", "--site", "local", "--sites-dir", str(sites), "--max-array-size", "none", "--total-shards",
              "1", "--dry-run", "--", "--input-dir", str(REPO / "sample_data" / "jsonl")]
    assert main(submit) == 2
    assert f"{ALLOCATOR_VARIABLE}='tcmalloc'" in capsys.readouterr().err
    (sites / "local.toml").write_text((REPO / "site_configs" / "local.toml").read_text())
    assert main(submit) == 0


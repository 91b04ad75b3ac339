"""scripts/slurm_cluster.py loads pyxis only where a site installed it, and builds nothing:
not even when another project's sources lie beside the checkout, as they once did."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SOURCES_DIR = "third" + "_party"  # spelled apart: no file of ours names that directory


def load_copy(checkout: Path):
    """The script as it would run from ``checkout`` (its own copy, so paths resolve from there)."""
    script = checkout / "scripts" / "slurm_cluster.py"
    script.parent.mkdir(parents=True)
    shutil.copyfile(REPO / "scripts" / "slurm_cluster.py", script)
    spec = importlib.util.spec_from_file_location("slurm_cluster_copy", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules["slurm_cluster_copy"] = module
    spec.loader.exec_module(module)
    return module


def planted_sources(root: Path) -> Path:
    """pyxis/enroot 'sources' whose build script would leave a mark if anything ran it."""
    marker = root / "BUILT"
    for where in (root / "shared" / SOURCES_DIR / "pyxis-enroot", root / "checkout" / SOURCES_DIR / "pyxis-enroot"):
        where.mkdir(parents=True)
        (where / "build.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
        (where / "build.sh").chmod(0o755)
    return marker


def test_no_pyxis_is_built_even_with_sources_beside_the_checkout(tmp_path, monkeypatch):
    marker = planted_sources(tmp_path)
    cluster = load_copy(tmp_path / "checkout")
    monkeypatch.setattr(cluster, "INSTALLED_PLUGIN_DIRS", (str(tmp_path / "no-plugins"),))
    monkeypatch.delenv(cluster.PYXIS_PLUGIN_VARIABLE, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert cluster.find_pyxis("auto") is None
    with pytest.raises(cluster.ClusterError, match="pyxis is not installed here .* set CURATOR_ARRAY_PYXIS_PLUGIN"):
        cluster.find_pyxis("required")
    assert not marker.exists(), "something ran a build script"
    text = (REPO / "scripts" / "slurm_cluster.py").read_text()
    assert SOURCES_DIR not in text and "build.sh" not in text


def test_an_installed_pyxis_is_found_where_the_variable_names_it(tmp_path, monkeypatch):
    planted_sources(tmp_path)
    cluster = load_copy(tmp_path / "checkout")
    prefix = tmp_path / "opt" / "pyxis"
    plugin = prefix / "lib" / "slurm" / "spank_pyxis.so"
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(b"\x7fELF")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "enroot").write_text("#!/bin/sh\n")
    (prefix / "bin" / "enroot").chmod(0o755)
    monkeypatch.setenv(cluster.PYXIS_PLUGIN_VARIABLE, str(plugin))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    found = cluster.find_pyxis("auto")
    assert found.plugin == plugin and found.bin == prefix / "bin" and "installed on this host" in found.how


def test_the_cluster_runs_oci_bundles_with_runc_for_any_user(tmp_path):
    cluster = load_copy(tmp_path / "checkout")
    (tmp_path / "root" / "etc").mkdir(parents=True)
    cluster.write_oci_conf(tmp_path / "root")
    conf = dict(line.split("=", 1) for line in (tmp_path / "root" / "etc" / "oci.conf").read_text().splitlines())
    assert conf["CreateEnvFile"] == "true", "without it the job's variables never reach the container"
    assert conf["RunTimeRun"].startswith('"runc --root=') and conf["RunTimeRun"].endswith(' -b %b"')
    assert set(conf) == {"RunTimeQuery", "RunTimeKill", "RunTimeDelete", "RunTimeRun", "CreateEnvFile"}, \
        "keys SLURM 22.05 does not know make slurmstepd die"
    assert (tmp_path / "root" / "runc").stat().st_mode & 0o1777 == 0o1777


def test_a_pid_file_counts_only_while_its_program_holds_the_pid(tmp_path):
    """After a killed session the pid files stay and their numbers go to other processes: such a
    process is neither taken for our daemon (dockerd refused to start beside it) nor signalled."""
    import subprocess
    import time

    cluster = load_copy(tmp_path / "checkout")
    sleeper = subprocess.Popen(["sleep", "60"])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{sleeper.pid}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":  # forked, not yet exec'd
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        (tmp_path / "sleep.pid").write_text(f"{sleeper.pid}\n")
        (tmp_path / "dockerd.pid").write_text(f"{sleeper.pid}\n")
        (tmp_path / "slurmd-node1.pid").write_text(f"{sleeper.pid}\n")
        assert cluster.pid_alive(tmp_path / "sleep.pid") == sleeper.pid
        assert cluster.pid_alive(tmp_path / "dockerd.pid") is None
        assert cluster.pid_alive(tmp_path / "slurmd-node1.pid") is None
    finally:
        sleeper.kill()
        sleeper.wait()
    assert cluster.pid_alive(tmp_path / "sleep.pid") is None, "ended"
    (tmp_path / "sleep.pid").write_text("not a pid\n")
    assert cluster.pid_alive(tmp_path / "sleep.pid") is None

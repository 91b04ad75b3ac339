"""The head launcher reads exactly the flags the head is given, and fits the installed Ray."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from curator_array.execution.ray_cluster import (
    NodeOptions,
    NodePorts,
    head_arguments,
    worker_arguments,
)
from curator_array.execution.ray_internals.launcher import (
    LOG_WAIT_S,
    SOCKET_RETRY_ATTEMPTS,
    SOCKET_RETRY_MS,
    LogMonitorThread,
    UnknownFlagError,
    declare_unused_agent_ports,
    head_system_config,
    lean_node_class,
    ray_params_from_flags,
    start_log_monitor_thread,
    unexpected_deaths,
    unused_agents,
    with_stand_in_agents,
)
from tests.conftest import REPO
from tests.support.processes import ended_within

PORTS = NodePorts(20000, 20001, 20002, 20003, 20004, 20005, 20006, 20007, 20008, 20071)


def test_every_head_flag_reaches_ray_params(tmp_path):
    options = NodeOptions(num_cpus=3, num_gpus=1, object_store_memory=200 * 2**20, job_memory_mb=4096,
                          custom_resources={"download_slot": 2.0})
    params = ray_params_from_flags(head_arguments(tmp_path, PORTS, options, node_ip="10.1.2.3"))
    assert params == {
        "node_ip_address": "10.1.2.3",
        "temp_dir": str(tmp_path),
        "gcs_server_port": 20000,
        "node_manager_port": 20001,
        "object_manager_port": 20002,
        "runtime_env_agent_port": 20003,
        "metrics_export_port": 20004,
        "metrics_agent_port": 20005,
        "dashboard_agent_listen_port": 20006,
        "min_worker_port": 20008,
        "max_worker_port": 20071,
        "num_cpus": 3,
        "num_gpus": 1,
        "object_store_memory": 200 * 2**20,
        "memory": (4096 - 200 - 1024) * 2**20,  # the job's, less the object store and Ray's own
        "resources": {"download_slot": 2.0},
    }


def test_every_worker_node_flag_reaches_ray_params(tmp_path):
    params = ray_params_from_flags(worker_arguments("10.0.0.1:20000", tmp_path, PORTS, NodeOptions(num_cpus=2)))
    assert params["gcs_address"] == "10.0.0.1:20000"
    assert params["temp_dir"] == str(tmp_path) and params["num_cpus"] == 2
    assert "gcs_server_port" not in params, "a worker node starts no GCS"
    assert params["runtime_env_agent_port"] == 20003 and params["max_worker_port"] == 20071


def test_an_unknown_flag_is_refused_by_name():
    with pytest.raises(UnknownFlagError, match="--block-size=3"):
        ray_params_from_flags(["--head", "--num-cpus=1", "--block-size=3"])


def test_a_malformed_value_is_refused():
    with pytest.raises(ValueError):
        ray_params_from_flags(["--resources=" + json.dumps({"a": 1})[:-1]])


def test_the_installed_ray_takes_the_lean_path(tmp_path):
    """If this fails, every head silently falls back to `ray start` (slower, still correct)."""
    from ray._private.parameter import RayParams

    assert lean_node_class() is not None
    params = ray_params_from_flags(head_arguments(tmp_path, PORTS, NodeOptions(num_cpus=1)))
    RayParams(include_dashboard=False, no_monitor=True, _system_config=head_system_config({}), **params)


def test_head_system_config_prestarts_preloaded_workers_retries_sockets_quickly_and_sends_no_events_or_metrics():
    assert head_system_config({}) == {
        "enable_worker_prestart": True,
        "preload_python_modules": ["ray.data"],
        "raylet_client_connect_timeout_milliseconds": 20,
        "raylet_client_num_connect_attempts": 500,
        "task_events_report_interval_ms": 0,
        "enable_metrics_collection": False,
    }
    assert SOCKET_RETRY_MS * SOCKET_RETRY_ATTEMPTS == 10_000, "Ray's own budget: 10 attempts, 1 s apart"


def test_a_ray_setting_the_user_exported_is_left_to_them():
    """Ray lets ``_system_config`` override ``RAY_<name>``; the launcher must not override the user."""
    config = head_system_config({"RAY_enable_worker_prestart": "0", "RAY_preload_python_modules": "torch"})
    assert "enable_worker_prestart" not in config and "preload_python_modules" not in config
    assert config["raylet_client_connect_timeout_milliseconds"] == SOCKET_RETRY_MS


class _Monitor:
    """Ray's ``LogMonitor`` as the thread drives it: each look publishes what ``published`` says
    next (nothing, once it runs out); ``error`` fails the first look; ``release`` ends the loop."""

    def __init__(self, error: BaseException | None = None, published: tuple[bool, ...] = ()):
        self.error, self.release, self.published = error, threading.Event(), list(published)
        self.looks = 0

    def should_update_filenames(self, last_listed: float) -> bool:
        return self.looks == 0

    def update_log_filenames(self):
        pass

    def open_closed_files(self):
        if self.error is not None:
            raise self.error
        if self.release.is_set():
            raise _Released

    def check_log_files_and_publish_updates(self) -> bool:
        self.looks += 1
        return self.published.pop(0) if self.published else False


class _Released(Exception):
    pass


def test_a_log_monitor_thread_that_failed_is_a_dead_node_process():
    """The launcher exits 1 and names it, as `ray start --block` does for a dead log monitor process."""
    running = LogMonitorThread(_Monitor())
    running.start()
    node = SimpleNamespace(dead_processes=list, log_monitor_thread=running)
    assert unexpected_deaths(node) == []
    running.monitor.release.set()
    running.join(5)
    assert not running.is_alive()
    failed = LogMonitorThread(_Monitor(RuntimeError("logs dir vanished")))
    failed.start()
    failed.join(5)
    node.log_monitor_thread = failed
    assert unexpected_deaths(node) == ["log monitor thread (RuntimeError('logs dir vanished'))"]


def test_the_log_monitor_waits_longer_while_nothing_is_written_and_looks_again_at_once_after_a_line():
    monitor = _Monitor(published=(False, False, False, False, False, True, True, False, False))
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        if len(waits) == 7:
            monitor.release.set()

    with pytest.raises(_Released):
        LogMonitorThread(monitor).follow(sleep)
    first, most = LOG_WAIT_S
    assert waits == [first, 2 * first, 4 * first, most, most, first, 2 * first]
    assert monitor.looks == 9, "a look that found lines is followed by another at once"


def test_a_log_monitor_ray_changed_is_left_to_its_own_process(monkeypatch):
    """Where ``LogMonitor`` takes other arguments, the launcher starts Ray's log monitor process instead."""
    import ray._private.log_monitor
    import ray._raylet

    class ChangedLogMonitor:
        def __init__(self, config):
            pass

    monkeypatch.setattr(ray._private.log_monitor, "LogMonitor", ChangedLogMonitor)
    monkeypatch.setattr(ray._raylet, "GcsClient", lambda address: None)
    node = SimpleNamespace(_node_ip_address="127.0.0.1", _logs_dir="/nonexistent", gcs_address="127.0.0.1:1")
    assert start_log_monitor_thread(node) is None


def test_unused_agent_ports_are_declared_as_a_minimal_agent_would(tmp_path, monkeypatch):
    """-1 in each port file the raylet waits for, so it registers before the agent has imported itself."""
    import ray._private.utils
    from ray._raylet import (
        DASHBOARD_AGENT_LISTEN_PORT_NAME,
        METRICS_AGENT_PORT_NAME,
        METRICS_EXPORT_PORT_NAME,
        RUNTIME_ENV_AGENT_PORT_NAME,
        get_port_filename,
        wait_for_persisted_port,
    )

    node_id = "ab" * 28
    monkeypatch.setattr(ray._private.utils, "get_dashboard_dependency_error", lambda: ImportError("aiohttp"))
    assert declare_unused_agent_ports(str(tmp_path), node_id)
    for name in (METRICS_AGENT_PORT_NAME, METRICS_EXPORT_PORT_NAME, DASHBOARD_AGENT_LISTEN_PORT_NAME):
        assert wait_for_persisted_port(str(tmp_path), node_id, name, timeout_ms=100) == -1
    assert not (tmp_path / get_port_filename(node_id, RUNTIME_ENV_AGENT_PORT_NAME)).exists(), "that agent serves a port"


def test_with_the_dashboard_installed_no_port_is_declared(tmp_path, monkeypatch):
    """A full agent serves real ports; the raylet must wait for them."""
    import ray._private.utils

    monkeypatch.setattr(ray._private.utils, "get_dashboard_dependency_error", lambda: None)
    assert not declare_unused_agent_ports(str(tmp_path), "cd" * 28)
    assert list(tmp_path.iterdir()) == []


def test_only_the_agents_nothing_uses_get_stand_ins():
    """The dashboard agent only where its ports were declared unused; the runtime-env agent only with a given port."""
    assert unused_agents(True, 20003) == {"--dashboard_agent_command", "--runtime_env_agent_command"}
    assert unused_agents(False, 20003) == {"--runtime_env_agent_command"}
    assert unused_agents(True, 0) == unused_agents(True, None) == {"--dashboard_agent_command"}
    assert unused_agents(False, None) == set()


def test_stand_ins_replace_exactly_the_named_agent_commands():
    command = ["/ray/raylet", "--node_id=ab", "--dashboard_agent_command=python agent.py --node-id=ab",
               "--runtime_env_agent_command=python main.py --port=1", "--huge_pages"]
    replaced = with_stand_in_agents(command, {"--dashboard_agent_command"})
    assert replaced[:2] == command[:2] and replaced[3:] == command[3:]
    flag, _, stand_in = replaced[2].partition("=")
    assert flag == "--dashboard_agent_command"
    assert stand_in.split() == [sys.executable, "-I", "-S", str(STAND_IN)]
    assert with_stand_in_agents(command, set()) == command


STAND_IN = Path(__file__).resolve().parents[2] / "curator_array" / "execution" / "ray_internals" / "stand_in_agent.py"
# Starts the stand-in as the raylet does (its pid in RAY_RAYLET_PID, the agent's arguments), prints its
# pid, then waits to be killed, or exits at once (``gone``) before the stand-in has even looked at it.
FAKE_RAYLET = r"""
import os, subprocess, sys, time
env = dict(os.environ, RAY_RAYLET_PID=str(os.getpid()))
child = subprocess.Popen([sys.executable, "-I", "-S", sys.argv[1], "--node-id=ab", "--grpc-port=-1"], env=env)
print(child.pid, flush=True)
if sys.argv[2] != "gone":
    time.sleep(600)
"""


def test_a_stand_in_agent_ends_with_its_raylet_and_on_sigterm():
    """Nothing is left behind: not when the raylet is SIGKILLed, not when the node's stop sends SIGTERM."""
    for ending in ("raylet killed", "stand-in terminated"):
        raylet = subprocess.Popen([sys.executable, "-c", FAKE_RAYLET, str(STAND_IN), "stays"], stdout=subprocess.PIPE,
                                  text=True)
        stand_in = int(raylet.stdout.readline())
        try:
            time.sleep(0.3)
            assert not ended_within(stand_in, 0.5), "the stand-in must live while its raylet does"
            os.kill(raylet.pid if ending == "raylet killed" else stand_in, signal.SIGKILL if ending == "raylet killed"
                    else signal.SIGTERM)
            assert ended_within(stand_in, 5), ending
        finally:
            raylet.kill()
            raylet.wait()


def test_a_stand_in_whose_raylet_died_before_it_started_ends_too():
    """On a loaded node the raylet may die before the stand-in's first instruction; it must not then wait forever."""
    raylet = subprocess.Popen([sys.executable, "-c", FAKE_RAYLET, str(STAND_IN), "gone"], stdout=subprocess.PIPE,
                              text=True)
    stand_in = int(raylet.stdout.readline())
    raylet.wait()
    try:
        assert ended_within(stand_in, 5), "the stand-in took its adopter for its raylet"
    finally:
        if not ended_within(stand_in, 0):
            os.kill(stand_in, signal.SIGKILL)


def test_the_private_uses_are_tried_only_on_the_tested_ray_releases(monkeypatch, caplog):
    """Ray's private API is used only on the releases pyproject.toml allows; on another
    release the run says so once and takes the public path."""
    import ray
    from ray.data._internal.execution import streaming_executor

    from curator_array.execution import ray_internals

    (low, high) = ray_internals.TESTED_RAY
    bound = f"ray[data]>={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"
    assert f'"{bound}"' in (REPO / "pyproject.toml").read_text(), "pyproject.toml bounds Ray to the tested releases"
    assert ray_internals.in_tested_range(ray.__version__), "the installed Ray is one the suite passes on"
    assert [ray_internals.in_tested_range(v) for v in ("2.59.9", "2.60.0rc1", "2.60.3", "2.61.0")] == \
        [False, True, True, False]

    monkeypatch.setattr(ray, "__version__", "2.99.0")
    ray_internals.private_api_allowed.cache_clear()
    try:
        stock = streaming_executor.create_cluster_autoscaler
        with caplog.at_level("WARNING", logger=ray_internals.__name__):
            for _ in range(2):
                with ray_internals.without_helper_actors():
                    assert streaming_executor.create_cluster_autoscaler is stock, "Ray Data's own autoscaler"
            ray_internals.reload_ray_auth()
        said = [r.getMessage() for r in caplog.records if "outside the releases" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith("Ray 2.99.0 is outside the releases curator-array was tested on")
    finally:
        ray_internals.private_api_allowed.cache_clear()


def test_the_log_monitor_does_not_pass_on_that_no_metrics_agent_answers():
    """No agent serves metrics on a private cluster, so after 30 s the GCS, the raylet and every
    worker log an error saying so; the launcher's log monitor keeps it from the driver."""
    from curator_array.execution.ray_internals.launcher import WithoutNoMetricsNotices

    published = []
    client = WithoutNoMetricsNotices(SimpleNamespace(publish_logs=published.append, address="gcs"))
    client.publish_logs({"pid": "raylet", "lines": [
        "[2026-12-04 01:58:16,542 E 9492 9492] (raylet) main.cc:1108: Failed to establish connection to the metrics "
        "exporter agent. Metrics will not be exported.", "a line of the raylet's own"]})
    client.publish_logs({"pid": "gcs_server", "lines": [
        "gcs_server.cc:1361: Failed to establish connection to the event+metrics exporter agent. Events and metrics "
        "will not be exported."]})
    client.publish_logs({"pid": 7, "lines": ["Traceback (most recent call last):"]})
    assert [data["lines"] for data in published] == [["a line of the raylet's own"], ["Traceback (most recent call last):"]]
    assert client.address == "gcs"


def test_the_launcher_of_an_untested_ray_release_becomes_ray_start_with_the_same_flags(monkeypatch, tmp_path, capsys):
    """On a Ray outside the tested releases the launcher replaces itself with ``ray start
    --block`` and exactly its own flags, before it touches Ray's private ``Node``. (That the
    replacement starts a working head is test_clients' fallback test.)"""
    import ray

    from curator_array.execution.ray_internals import launcher

    class Replaced(Exception):
        pass

    def exec_instead(executable, argv):
        raise Replaced(executable, argv)

    monkeypatch.setattr(ray, "__version__", "2.99.0")
    monkeypatch.setattr(launcher.os, "execvp", exec_instead)
    monkeypatch.setattr(launcher, "lean_node_class", lambda: pytest.fail("Ray's Node was looked at"))
    flags = head_arguments(tmp_path, PORTS, NodeOptions(num_cpus=1, object_store_memory=100 * 2**20))
    with pytest.raises(Replaced) as replaced:
        launcher.main(flags)
    executable, argv = replaced.value.args
    assert argv == [executable, "start", "--block", *flags] and Path(executable).name == "ray"
    assert ("Ray 2.99.0 is outside the releases curator-array was tested on; using `ray start --block` instead"
            in capsys.readouterr().err)

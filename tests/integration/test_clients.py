"""RayClient isolation on one host: auth, ports, concurrent clusters, clusters we do not own."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from curator_array.execution.ray_cluster import (
    NodeOptions,
    NodePorts,
    RayNodeProcess,
    head_arguments,
    launcher_command,
    new_session_dir,
    ray_environment,
    report_fallback,
    start_head,
    wait_for_head,
    worker_arguments,
    write_token,
)
from curator_array.execution.ray_internals.launcher import (
    AGENT_NICENESS,
    READY_FILE,
    head_system_config,
)
from tests.conftest import REPO, ray_errors, read_records, records_digest

pytestmark = pytest.mark.ray


@pytest.fixture(autouse=True)
def own_temp_dir(monkeypatch, tmp_path_factory):
    """Each test's Ray sessions, those it starts by hand and those its commands keep after an
    error (by design), go under a short dir of its own that is removed after it: Ray's socket
    paths must stay short, so not under ``tmp_path`` (whose root is fixed first, or pytest
    would make it under this dir when no earlier test has asked for it)."""
    tmp_path_factory.getbasetemp()
    root = tempfile.mkdtemp(prefix="ca-test-")
    monkeypatch.setattr(tempfile, "tempdir", root)
    monkeypatch.setenv("TMPDIR", root)
    yield
    shutil.rmtree(root, ignore_errors=True)


CLI = [sys.executable, "-m", "curator_array.cli"]


def run_cli(*args, env=None, timeout=180):
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    if done.returncode == 0:
        assert not ray_errors(done.stderr), ray_errors(done.stderr)
    return done


CLIENT_PROBE = r"""
import json, os, stat, subprocess, sys
from curator_array.execution.clients import RayClient
from curator_array.execution.ray_cluster import NodeOptions
with RayClient(node_options=NodeOptions(num_cpus=1, object_store_memory=100 * 2**20)) as client:
    host, port = client.address.rsplit(":", 1)
    mode = stat.S_IMODE(os.stat(client.token_path).st_mode)
    members = client.head.members()
    names = [open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode() for p in members]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["RAY_AUTH_MODE"] = "disabled"
    intruder = subprocess.run([sys.executable, "-c",
        "import ray; ray.init(address=%r)" % client.address],
        env=env, capture_output=True, text=True, timeout=60)
    result = dict(port=int(port), mode=mode, session_dir=str(client.session_dir), names=names,
                  intruder_rc=intruder.returncode, intruder_err=intruder.stderr)
print("RESULT" + json.dumps(result))
print("LEFT" + json.dumps(client.head.members()) + " " + str(client.teardown_s))
"""


def test_private_head_is_authenticated_isolated_and_stopped(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CLIENT_PROBE], capture_output=True, text=True, timeout=180, cwd=REPO)
    lines = {line[:4]: line[4:] for line in proc.stdout.splitlines() if line[:4] in ("RESU", "LEFT")}
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(lines["RESU"][2:])
    assert result["port"] != 6379
    assert result["mode"] == 0o600
    assert len(result["session_dir"]) < 40
    names = result["names"]
    assert any("-m curator_array.execution.ray_internals.launcher --head" in n for n in names)
    assert any("gcs_server" in n for n in names) and any("raylet" in n for n in names)
    assert not [n for n in names if "dashboard/dashboard.py" in n or "autoscaler/_private/monitor.py" in n], names
    assert len([n for n in names if is_stand_in(n)]) == 2, names
    assert not [n for n in names if "dashboard/agent.py" in n or "runtime_env/agent/main.py" in n], names
    assert result["intruder_rc"] != 0, "a client without the token must be rejected"
    assert "token-auth" in result["intruder_err"] or "Authentication" in result["intruder_err"]
    left, teardown = lines["LEFT"].split(" ")
    assert json.loads(left) == []
    assert float(teardown) <= 2.0
    assert not Path(result["session_dir"]).exists()


FALLBACK_PROBE = r"""
import sys
import ray._private.node
del ray._private.node.Node.dead_processes  # stands for a Ray whose internals changed
from curator_array.execution.ray_internals import launcher as ray_launcher
sys.exit(ray_launcher.main(sys.argv[1:]))
"""


def cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode()


def is_stand_in(command_line: str) -> bool:
    """A stand-in agent's own process (the raylet's command line names it too, and may add flags after it)."""
    words = command_line.split()
    return words[1:3] == ["-I", "-S"] and len(words) > 3 and words[3].endswith("execution/ray_internals/stand_in_agent.py")


def wait_until_ready(node: RayNodeProcess, address: str) -> None:
    """As the driver waits: for the launcher's ready file (or, after a fallback, the GCS port)."""
    host, _, port = address.rpartition(":")
    wait_for_head(node, node.log_path.parent, host, int(port), timeout_s=60)


def assert_runs_a_task(address: str, env: dict[str, str]) -> None:
    """A driver of its own connects to the cluster at ``address`` and gets a task's result."""
    driver = subprocess.run(
        [sys.executable, "-c", (f"import ray; ray.init(address={address!r}); "
                                "print('SUM', ray.get(ray.remote(lambda: 2 + 3).remote()))")],
        env=env, capture_output=True, text=True, timeout=120)
    assert "SUM 5" in driver.stdout, driver.stderr[-2000:]


def _start_with(command_for):
    """A head whose launcher command is ``command_for(args)``, and a driver that used it."""
    session = new_session_dir()
    token = write_token(session / "auth_token")
    ports = NodePorts.allocate()
    args = head_arguments(session, ports, NodeOptions(num_cpus=1, object_store_memory=100 * 2**20))
    node = RayNodeProcess(command_for(args), ray_environment(token), session / "ray-head.log", None)
    return node, f"127.0.0.1:{ports.gcs}", token


def test_head_falls_back_to_ray_start_where_ray_internals_differ(caplog):
    """Where Ray's ``Node`` is not as expected, the launcher's ``ray start --block`` is a working
    head (on an untested Ray release it takes the same path: test_ray_launcher)."""
    reason = "this Ray has no ray._private.node.Node as expected"
    node, address, token = _start_with(lambda args: [sys.executable, "-c", FALLBACK_PROBE, *args])
    try:
        start_head(node.log_path.parent, token, NodeOptions(), spawned=(node, address))
        assert any(f"Ray head: {reason}; using `ray start --block`"
                   in r.getMessage() for r in caplog.records if r.levelname == "WARNING"), caplog.text
        assert_runs_a_task(address, ray_environment(token))
        assert "using `ray start --block` instead" in node.log_tail(40)
        names = [cmdline(p) for p in node.members()]
        assert any("dashboard/dashboard.py" in n for n in names), "the fallback is the stock `ray start`"
    finally:
        node.stop()
    assert not node.members()


def test_worker_node_falls_back_to_ray_start_and_still_joins(caplog):
    node, address, token = _start_with(launcher_command)
    joining = None
    try:
        start_head(node.log_path.parent, token, NodeOptions(), spawned=(node, address))
        session = new_session_dir()
        args = worker_arguments(address, session, NodePorts.allocate(), NodeOptions(num_cpus=1, object_store_memory=100 * 2**20))
        joining = RayNodeProcess([sys.executable, "-c", FALLBACK_PROBE, *args], ray_environment(token),
                                 session / "ray-worker.log", None)
        driver = subprocess.run(
            [sys.executable, "-c", (f"import ray, time; ray.init(address={address!r}); end = time.monotonic() + 150\n"
                                    "while sum(n['Alive'] for n in ray.nodes()) < 2 and time.monotonic() < end:\n"
                                    "    time.sleep(0.1)\n"
                                    "print('NODES', sum(n['Alive'] for n in ray.nodes()))")],
            env=ray_environment(token), capture_output=True, text=True, timeout=240)
        assert "NODES 2" in driver.stdout, driver.stdout + driver.stderr[-2000:] + joining.log_tail()
        report_fallback(joining, "Ray worker node")
        assert any(r.getMessage().startswith("Ray worker node: this Ray has no ray._private.node.Node as expected")
                   for r in caplog.records if r.levelname == "WARNING"), caplog.text
    finally:
        if joining is not None:
            joining.stop()
        node.stop()
    assert not node.members() and not (joining and joining.members())


NO_RETRY_SLEEP_DRIVER = r"""
import pathlib, sys, time, ray, ray._private.services as services
class NoSleep:
    def __getattr__(self, name):
        import time
        return getattr(time, name)
    def sleep(self, seconds):
        raise AssertionError(f"ray.init slept {seconds} s waiting for the node")
services.time = NoSleep()
ready = pathlib.Path(sys.argv[2])
while not ready.exists():
    time.sleep(0.01)
ray.init(address=sys.argv[1])
print("SUM", ray.get(ray.remote(lambda: 2 + 3).remote()))
"""


SLOW_REGISTRATION_PROBE = r"""
import sys
from curator_array.execution.ray_internals import launcher as ray_launcher
ray_launcher.declare_unused_agent_ports = lambda *args: False  # the raylet waits for its agents again
sys.exit(ray_launcher.main(sys.argv[1:]))
"""


def niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rsplit(b")", 1)[1].split()[16])


def test_lean_head_reports_ready_once_registered_with_a_real_agent_deprioritized():
    """The ready file means a driver connects at once; a real agent yields the CPU, nothing else does.

    The raylet is made to register slowly (about 1 s, waiting for its dashboard agent,
    which then runs for real), so a ready file written too early would send ``ray.init``
    into its retry sleep.
    """
    node, address, token = _start_with(lambda args: [sys.executable, "-c", SLOW_REGISTRATION_PROBE, *args])
    try:
        ready = node.log_path.parent / READY_FILE
        # The driver imports Ray first, then connects the moment the file appears.
        driver = subprocess.run([sys.executable, "-c", NO_RETRY_SLEEP_DRIVER, address, str(ready)],
                                env=ray_environment(token), capture_output=True, text=True, timeout=120)
        assert "SUM 5" in driver.stdout, driver.stderr[-2000:]
        by_name = {cmdline(p).strip(): p for p in node.members()}
        agents = {name: pid for name, pid in by_name.items() if "Agent" in name}
        assert sorted(agents) == ["ray::DashboardAgent"], by_name
        assert len([name for name in by_name if is_stand_in(name)]) == 1, by_name
        assert {niceness(pid) for pid in agents.values()} == {AGENT_NICENESS}
        assert {os.sched_getscheduler(pid) for pid in agents.values()} == {os.SCHED_IDLE}
        core = [pid for name, pid in by_name.items() if "gcs_server" in name or "raylet/raylet" in name]
        assert [niceness(pid) for pid in core] == [0, 0] and niceness(node.pid) == 0, by_name
        assert {os.sched_getscheduler(pid) for pid in [*core, node.pid]} == {os.SCHED_OTHER}
        assert node.running(), "the minimal agent accepted the port files written before it"
    finally:
        node.stop()
    assert not node.members()


WORKER_OUTPUT = "OUTPUT-OF-A-WORKER"
PRELOAD_DRIVER = r"""
import json, sys, time, ray
ray.init(address=sys.argv[1])

@ray.remote
def probe():
    print("OUTPUT-OF-A-WORKER", flush=True)
    return "ray.data" in sys.modules

result = {"preloaded": ray.get(probe.remote()), "config": ray._private.state.state.get_system_config()}
print("RESULT" + json.dumps(result), flush=True)
time.sleep(60)  # stopped by the test once the worker's output has arrived
"""


def worker_output_arrived(lines: list[str]) -> bool:
    """Ray prefixes what a worker prints with its task's name and pid when it reaches the driver."""
    return any(WORKER_OUTPUT in line and "(probe pid=" in line for line in lines)


def driver_lines(script: str, address: str, token: Path, done, timeout_s: float = 120) -> list[str]:
    """A driver's stdout, read until ``done(lines)`` holds or it exits; the driver is killed after."""
    driver = subprocess.Popen([sys.executable, "-c", script, address], env=ray_environment(token),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done(lines) and (line := driver.stdout.readline()):
            lines.append(line)
    finally:
        driver.kill()
        driver.wait()
    return lines


def test_lean_head_prestarts_workers_with_ray_data_and_its_log_monitor_thread_streams_their_output():
    """Before any driver connects, a worker is up and importing Ray Data; its output still reaches the driver.

    The probe never imports Ray Data itself, so only the preload explains it in the
    worker; and no log monitor process exists, so the launcher's thread carried the line.
    """
    node, address, token = _start_with(launcher_command)
    try:
        wait_until_ready(node, address)
        assert (node.log_path.parent / READY_FILE).exists(), node.log_tail()
        names = [cmdline(p) for p in node.members()]
        assert any("workers/default_worker.py" in n or n.startswith("ray::IDLE") for n in names), names
        assert not [n for n in names if "log_monitor.py" in n], names
        lines = driver_lines(PRELOAD_DRIVER, address, token,
                             lambda ls: worker_output_arrived(ls) and any(x.startswith("RESULT") for x in ls))
        results = [json.loads(x[len("RESULT"):]) for x in lines if x.startswith("RESULT")]
        assert results and worker_output_arrived(lines), lines
        assert results[0]["preloaded"] is True
        assert {k: results[0]["config"].get(k) for k in head_system_config({})} == head_system_config({})
    finally:
        node.stop()
    assert not node.members()


REMOTE_OUTPUT_DRIVER = r"""
import sys, time, ray
ray.init(address=sys.argv[1])
while sum(n["Alive"] for n in ray.nodes()) < 2:
    time.sleep(0.1)

@ray.remote(resources={"second_node": 1})
def probe():
    print("OUTPUT-OF-A-WORKER", flush=True)

ray.get(probe.remote())
time.sleep(60)  # stopped by the test once the worker's output has arrived
"""


def test_worker_output_on_a_joined_node_reaches_the_driver_through_that_nodes_launcher():
    """Each node's launcher runs its own log monitor thread; the second node's reaches the head's driver."""
    node, address, token = _start_with(launcher_command)
    joining = None
    try:
        start_head(node.log_path.parent, token, NodeOptions(), spawned=(node, address))
        session = new_session_dir()
        options = NodeOptions(num_cpus=1, object_store_memory=100 * 2**20, custom_resources={"second_node": 1.0})
        joining = RayNodeProcess(launcher_command(worker_arguments(address, session, NodePorts.allocate(), options)),
                                 ray_environment(token), session / "ray-worker.log", None)
        lines = driver_lines(REMOTE_OUTPUT_DRIVER, address, token, worker_output_arrived)
        assert worker_output_arrived(lines), lines + [joining.log_tail()]
        assert not [p for p in joining.members() if "log_monitor.py" in cmdline(p)]
    finally:
        if joining is not None:
            joining.stop()
        node.stop()
    assert not node.members() and not (joining and joining.members())


def test_head_launcher_exits_when_a_ray_process_dies():
    node, address, _ = _start_with(launcher_command)
    try:
        wait_until_ready(node, address)
        raylet = [p for p in node.members() if "raylet/raylet" in cmdline(p)]
        assert raylet, node.log_tail()
        stand_ins = [p for p in node.members() if is_stand_in(cmdline(p))]
        assert len(stand_ins) == 2, [cmdline(p) for p in node.members()]
        os.kill(raylet[0], signal.SIGKILL)
        assert node.process.wait(timeout=30) == 1
        assert "Ray process died: raylet" in node.log_tail(40)
        deadline = time.monotonic() + 5
        while set(stand_ins) & set(node.members()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not set(stand_ins) & set(node.members()), "the stand-ins end with their raylet, unasked"
    finally:
        node.stop()
    assert not node.members()


def test_two_clients_at_once_do_not_interfere(sample_jsonl, tmp_path):
    procs = []
    for name in ("a", "b"):
        args = ["run", "--input-dir", str(sample_jsonl), "--output-dir", str(tmp_path / name), "--num-cpus", "1",
                "--object-store-memory", str(100 * 2**20), "--no-progress"]
        procs.append(subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO))
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert records_digest(read_records(tmp_path / "a")) == records_digest(read_records(tmp_path / "b"))
    assert len(read_records(tmp_path / "a")) == 1512


def test_cluster_started_outside_survives(sample_jsonl, tmp_path):
    session = new_session_dir()
    token = write_token(session / "auth_token")
    external, address = start_head(session, token, NodeOptions(num_cpus=1, object_store_memory=100 * 2**20))
    try:
        env = ray_environment(token)
        result = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(tmp_path / "ext"),
                         "--ray-address", address, "--no-progress", env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert external.running() and external.members()
        own = run_cli("run", "--input-dir", str(sample_jsonl), "--output-dir", str(tmp_path / "own"),
                      "--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress")
        assert own.returncode == 0, own.stderr[-3000:]
        assert external.running() and external.members(), "our client's stop must not touch other clusters"
        assert_runs_a_task(address, env)
    finally:
        external.stop()
    assert not external.members()


def test_cli_exit_codes_reach_the_shell(sample_jsonl, tmp_path):
    (sample_jsonl / "zz-bad.jsonl").write_text('{"text": "ok"}\n{"text": oops\n')
    args = ["run", "--input-dir", str(sample_jsonl), "--output-dir", str(tmp_path / "out"), "--num-cpus", "1",
            "--object-store-memory", str(100 * 2**20), "--no-progress"]
    failed = run_cli(*args)
    assert failed.returncode == 3, failed.stderr[-2000:]
    assert "zz-bad.jsonl: line 2: malformed JSON record" in failed.stderr
    assert "Fix the file and run the same command again with --repair" in failed.stderr and \
        "finished tasks are kept" in failed.stderr, \
        "a run outside an array is not sent to SLURM"
    assert "retry --submit" not in failed.stderr and "finished:" not in failed.stderr
    assert "Progress bars disabled" not in failed.stderr, "Ray's hint names a setting our users do not set"
    assert re.search(r"incomplete: \d+/\d+ tasks \(1 failed\)", failed.stderr), failed.stderr[-2000:]
    (sample_jsonl / "zz-bad.jsonl").unlink()
    changed = run_cli(*args)
    assert changed.returncode == 2 and "zz-bad.jsonl is gone" in changed.stderr, changed.stderr[-2000:]
    assert "Traceback" not in changed.stderr

"""A private Ray node that reaches its first task sooner than ``ray start``.

An array element's cluster lives for one element and never grows, and on a 2-core node
its start-up is CPU-bound: every process that imports Python competes with the driver
and the first worker. Measured by ``bench/bench_startup.py``, this launcher differs
from ``ray start --block`` in these ways:

- on the head, no dashboard head and no autoscaler monitor (``ray start`` also waits
  for the dashboard before it starts the raylet): about 1 s;
- the minimal dashboard agent's "unused" ports are declared before the raylet starts,
  so the raylet registers without waiting for that agent to import itself (see
  :func:`declare_unused_agent_ports`): about 1 s;
- the raylet's two agents, which serve nothing here, are replaced by a stand-in of
  3 MiB each (:func:`stand_in_agents`): about 100 MiB less per node; where an agent
  must stay real, it runs at the lowest CPU priority (:func:`deprioritize_agents`);
- the log monitor runs as a thread of this process, which has imported Ray already,
  instead of a process importing it again (:func:`start_log_monitor_thread`), and does not
  pass on the notices that no metrics agent answers (there is none);
- the head's system config (:func:`head_system_config`) has the raylet start a worker
  with Ray Data imported while the driver is still importing, and retry its local
  socket connections every 20 ms instead of every second;
- it reports when the node is registered (:data:`READY_FILE`), so the driver's
  ``ray.init`` never falls into its 1-second retry sleep.

Otherwise it starts the same processes (on the head: GCS, raylet) through Ray's
own ``Node`` class, then behaves like ``ray start --block``: it stays in the foreground,
stops the node on SIGTERM, and exits non-zero as soon as one of the node's processes dies.

``Node`` is Ray's internal API. Where it is missing or has changed, the launcher replaces
itself with ``ray start --block`` and the same flags, so an unfamiliar Ray costs start-up
time, never correctness. It takes exactly the flags ``ray_cluster`` gives ``ray start``::

    python -m curator_array.execution.ray_internals.launcher --head --port=... --temp-dir=... --num-cpus=...
    python -m curator_array.execution.ray_internals.launcher --address=HEAD:PORT --temp-dir=... --num-cpus=...

On a Ray outside the releases it was tested on (``ray_internals.TESTED_RAY``) it is
``ray start --block`` at once. It imports nothing from the package but its own package's
face: it must start before, and without, the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from . import FALLBACK_NOTICE, LAUNCHER_MODULE, READY_FILE, in_tested_range

# ray start flag -> (RayParams field, parser)
PARAMS: dict[str, tuple[str, Callable[[str], object]]] = {
    "--address": ("gcs_address", str),
    "--port": ("gcs_server_port", int),
    "--node-ip-address": ("node_ip_address", str),
    "--temp-dir": ("temp_dir", str),
    "--node-manager-port": ("node_manager_port", int),
    "--object-manager-port": ("object_manager_port", int),
    "--runtime-env-agent-port": ("runtime_env_agent_port", int),
    "--metrics-export-port": ("metrics_export_port", int),
    "--dashboard-agent-grpc-port": ("metrics_agent_port", int),
    "--dashboard-agent-listen-port": ("dashboard_agent_listen_port", int),
    "--min-worker-port": ("min_worker_port", int),
    "--max-worker-port": ("max_worker_port", int),
    "--num-cpus": ("num_cpus", int),
    "--num-gpus": ("num_gpus", int),
    "--object-store-memory": ("object_store_memory", int),
    "--memory": ("memory", int),
    "--resources": ("resources", json.loads),
}
# Meaningful only to the processes this launcher does not start, or already implied.
WITHOUT_EFFECT = {"--head", "--include-dashboard", "--disable-usage-stats", "--dashboard-port", "--dashboard-host"}
# How a node process ends when it was asked to stop (see `ray start --block`).
STOPPED_ON_REQUEST = {0, signal.SIGTERM, -signal.SIGTERM, 128 + signal.SIGTERM}


# The raylet's flag for each of its two agents -> the agent's script, relative to Ray's package.
AGENTS = {
    "--dashboard_agent_command": ("dashboard", "agent.py"),
    "--runtime_env_agent_command": ("_private", "runtime_env", "agent", "main.py"),
}
# The niceness (with SCHED_IDLE) of an agent that stays real.
AGENT_NICENESS = 19
# Imported by every worker before its first task (see head_system_config).
WORKER_PRELOAD = ("ray.data",)
# How often, and how many times, Ray's processes retry a local socket (10 s in all, as Ray's own default).
SOCKET_RETRY_MS, SOCKET_RETRY_ATTEMPTS = 20, 500


class UnknownFlagError(ValueError):
    pass


def ray_executable() -> str:
    candidate = Path(sys.executable).with_name("ray")
    return str(candidate) if candidate.exists() else "ray"


def ray_params_from_flags(flags: Sequence[str]) -> dict[str, object]:
    """``--flag=value`` arguments of ``ray start`` (head or worker node) as ``RayParams`` keyword arguments."""
    params: dict[str, object] = {}
    unknown = []
    for flag in flags:
        name, _, value = flag.partition("=")
        if name in PARAMS:
            field, parse = PARAMS[name]
            params[field] = parse(value)
        elif name not in WITHOUT_EFFECT:
            unknown.append(flag)
    if unknown:
        raise UnknownFlagError(f"ray_launcher does not know {' '.join(unknown)}; teach it in PARAMS or WITHOUT_EFFECT")
    return params


def lean_node_class():
    """Ray's ``Node`` for a lean node (see the module's docstring), or ``None`` where Ray's internals differ.

    Only the absence of what it overrides sends the launcher back to ``ray start``; the
    other measures use internal attributes too and are skipped one by one where those
    are missing, so an unfamiliar Ray only starts slower.
    """
    try:
        from ray._private import ray_constants
        from ray._private.node import Node
    except ImportError:
        return None
    if not callable(getattr(Node, "start_api_server", None)) or not callable(getattr(Node, "dead_processes", None)):
        return None

    class LeanNode(Node):
        def start_api_server(self, *args, **kwargs):
            self._webui_url = ""

        def start_log_monitor(self):
            self.log_monitor_thread = start_log_monitor_thread(self)
            if self.log_monitor_thread is None:
                super().start_log_monitor()

        def start_raylet(self, *args, **kwargs):
            session_dir, node_id = getattr(self, "_session_dir", None), getattr(self, "_node_id", None)
            unused_ports = bool(session_dir and node_id) and declare_unused_agent_ports(session_dir, node_id)
            runtime_env_port = getattr(getattr(self, "_ray_params", None), "runtime_env_agent_port", None)
            standing_in = unused_agents(unused_ports, runtime_env_port)
            with stand_in_agents(standing_in):
                super().start_raylet(*args, **kwargs)
            raylets = getattr(self, "all_processes", {}).get(ray_constants.PROCESS_TYPE_RAYLET) or []
            real = agent_scripts(set(AGENTS) - standing_in)
            if raylets and real:
                threading.Thread(target=deprioritize_agents, args=(raylets[0].process.pid, real), daemon=True).start()

    return LeanNode


def declare_unused_agent_ports(session_dir: str, node_id: str) -> bool:
    """Write the "not in use" (-1) ports a minimal dashboard agent would write, before the raylet starts.

    The raylet registers its node only once it has read every agent port file, and the
    agent writes them after importing itself: about 1 s on a busy 2-core node, all of it
    before the driver can connect. Where only ``ray[data]`` is installed (no dashboard
    dependencies) Ray starts that agent with ``--minimal``, and a minimal agent serves
    none of these ports: it writes -1 into each. Writing the same values first lets the
    raylet register at once; a stand-in then takes the agent's place
    (:func:`stand_in_agents`). With the dashboard's dependencies installed the agent
    serves real ports, so nothing is written, the real agent starts and the raylet waits
    as usual. Returns whether it wrote them.
    """
    try:
        from ray._private.utils import get_dashboard_dependency_error
        from ray._raylet import (
            DASHBOARD_AGENT_LISTEN_PORT_NAME,
            METRICS_AGENT_PORT_NAME,
            METRICS_EXPORT_PORT_NAME,
            persist_port,
        )
    except ImportError:
        return False
    if get_dashboard_dependency_error() is None:
        return False
    try:
        for name in (METRICS_AGENT_PORT_NAME, METRICS_EXPORT_PORT_NAME, DASHBOARD_AGENT_LISTEN_PORT_NAME):
            persist_port(session_dir, node_id, name, -1)
    except (TypeError, OSError):
        return False
    return True


def unused_agents(unused_ports_declared: bool, runtime_env_agent_port: int | None) -> set[str]:
    """The raylet flags of the agents a stand-in can replace on this node.

    The dashboard agent, where it would run minimal: exactly when its unused ports were
    declared (:func:`declare_unused_agent_ports`), since the raylet waits for port files
    that a stand-in never writes. The runtime-env agent, where its port is given: the
    raylet then reads no port file of it, and calls it only for a task that asks for a
    runtime environment, which no stage can (``RayStageSpec`` takes no such key).
    """
    flags = set()
    if unused_ports_declared:
        flags.add("--dashboard_agent_command")
    if runtime_env_agent_port:
        flags.add("--runtime_env_agent_command")
    return flags


def with_stand_in_agents(raylet_command: Sequence[str], flags: set[str]) -> list[str]:
    """``raylet_command`` with the agent commands named by ``flags`` replaced by :mod:`stand_in_agent`."""
    stand_in = subprocess.list2cmdline([sys.executable, "-I", "-S", str(Path(__file__).with_name("stand_in_agent.py"))])
    replaced = []
    for argument in raylet_command:
        flag, equals, _ = argument.partition("=")
        replaced.append(f"{flag}={stand_in}" if equals and flag in flags else argument)
    return replaced


@contextlib.contextmanager
def stand_in_agents(flags: set[str]):
    """While Ray's ``Node`` starts the raylet, have it start stand-ins for the agents named by ``flags``.

    Ray builds the raylet's command inside ``services.start_raylet`` and hands it to
    ``services.start_ray_process``; the stand-ins go in there. Where that function is
    missing, the real agents start.
    """
    try:
        from ray._private import ray_constants, services
    except ImportError:
        services = None
    start = getattr(services, "start_ray_process", None)
    if not flags or not callable(start):
        yield
        return

    def start_with_stand_ins(command, process_type, *args, **kwargs):
        if process_type == ray_constants.PROCESS_TYPE_RAYLET:
            command = with_stand_in_agents(command, flags)
        return start(command, process_type, *args, **kwargs)

    services.start_ray_process = start_with_stand_ins
    try:
        yield
    finally:
        services.start_ray_process = start


def head_system_config(environ: Mapping[str, str]) -> dict[str, object]:
    """Ray system settings for the whole cluster, given once on the head; a ``RAY_<name>`` the user set wins.

    - ``enable_worker_prestart``: the raylet starts its workers as soon as it is up
      (otherwise it waits for the driver to connect), and ``preload_python_modules`` has
      each import Ray Data before it takes work. The first worker's imports (about
      1.5 CPU-seconds) then overlap the driver's instead of following them. Every
      worker of this pipeline imports Ray Data for its first task anyway; one that never
      gets a task (an actor-only pipeline) holds 64 MiB more (178 against 114 MiB RSS).
      Ray prestarts as many workers either way (one per CPU), only later: when the
      driver connects.
    - ``raylet_client_connect_timeout_milliseconds``: the raylet connects to its own
      object store socket right after starting the thread that creates it. Losing that
      race cost a whole second of sleep in about one start in four here; retrying every
      20 ms as many times keeps Ray's 10-s budget for a socket that is slow to appear.
    - ``task_events_report_interval_ms`` 0: no task events. Every Ray process buffers an
      event for each state of each task and sends them to the GCS every second, for the
      dashboard and ``ray list tasks`` alone (a run here has neither), and the driver's
      ``ray.shutdown`` may wait for its last send: 0.30 s in 4 shutdowns of 7 with them,
      0.04–0.09 s in 14 of 14 without (a small Ray Data run each).
    - ``enable_metrics_collection`` off: every Ray process gathers metrics for an agent
      that our nodes do not run (its stand-in serves nothing), and tries to reach it. Off,
      the driver, raylet and GCS spend 0.009 of a core less through a run (bench_selection:
      57 against 49 ms a second).
    """
    settings: dict[str, object] = {
        "enable_worker_prestart": True,
        "preload_python_modules": list(WORKER_PRELOAD),
        "raylet_client_connect_timeout_milliseconds": SOCKET_RETRY_MS,
        "raylet_client_num_connect_attempts": SOCKET_RETRY_ATTEMPTS,
        "task_events_report_interval_ms": 0,
        "enable_metrics_collection": False,
    }
    return {name: value for name, value in settings.items() if f"RAY_{name}" not in environ}


# The log monitor's wait between looks at the log files: after a line, and at most (LogMonitorThread.follow).
LOG_WAIT_S = (0.1, 0.5)


class LogMonitorThread(threading.Thread):
    """Ray's log monitor (worker output to the drivers), run by the launcher instead of a process of its own.

    The process would import Ray again: about 0.75 CPU-seconds on a node whose start-up
    is CPU-bound. A monitor that fails is a node process that died (see :func:`watch`).
    """

    def __init__(self, monitor):
        super().__init__(name="ray-log-monitor", daemon=True)
        self.monitor = monitor
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.follow()
        except BaseException as exc:  # noqa: BLE001 - reported by watch()
            self.error = exc

    def follow(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """Ray's own loop (``LogMonitor.run``), but a quiet spell lengthens the wait between looks.

        Ray looks ten times a second, listing and reading the workers' log files each time:
        8.5 ms of CPU a second through a run (bench_selection), 1.8–2.0 this way. Here the wait
        doubles while nothing is written, up to half a second, and is short again once a line is.
        """
        monitor, wait_s, listed_at = self.monitor, LOG_WAIT_S[0], time.time()
        while True:
            if monitor.should_update_filenames(listed_at):
                monitor.update_log_filenames()
                listed_at = time.time()
            monitor.open_closed_files()
            if monitor.check_log_files_and_publish_updates():
                wait_s = LOG_WAIT_S[0]
                continue
            sleep(wait_s)
            wait_s = min(2 * wait_s, LOG_WAIT_S[1])


# What Ray's processes log, 30 s after they start, when no agent serves metrics: the case of
# every node this launcher starts (its dashboard agent is a stand-in, or minimal).
NO_METRICS_AGENT = re.compile(r"Failed to establish connection to the (event\+)?metrics exporter agent")


class WithoutNoMetricsNotices:
    """The GCS client the log monitor publishes through, minus the lines that say no metrics
    agent answers: a private cluster has none by design, so they are no fault of the run's,
    and a user reads an error line as one."""

    def __init__(self, client):
        self.client = client

    def publish_logs(self, data: dict) -> None:
        lines = [line for line in data.get("lines", []) if not NO_METRICS_AGENT.search(line)]
        if lines or not data.get("lines"):
            self.client.publish_logs({**data, "lines": lines})

    def __getattr__(self, name: str):
        return getattr(self.client, name)


def start_log_monitor_thread(node) -> LogMonitorThread | None:
    """The log monitor running in this process, or ``None`` where Ray's ``LogMonitor`` is not as expected."""
    try:
        from ray._private.log_monitor import LogMonitor, is_proc_alive
        from ray._raylet import GcsClient

        monitor = LogMonitor(node._node_ip_address, node._logs_dir,
                             WithoutNoMetricsNotices(GcsClient(address=node.gcs_address)),
                             is_proc_alive, gcs_address=node.gcs_address)
    except (ImportError, AttributeError, TypeError):
        return None
    thread = LogMonitorThread(monitor)
    thread.start()
    return thread


def agent_scripts(flags) -> set[bytes]:
    """The script paths of the agents named by ``flags``, as they appear in a process's cmdline."""
    import ray

    root = Path(ray.__file__).parent
    return {str(root.joinpath(*AGENTS[flag])).encode() for flag in flags}


def children(pid: int) -> list[int]:
    """Direct children of ``pid``, from each of its threads' ``children`` list (Linux)."""
    found = []
    try:
        tasks = list(os.scandir(f"/proc/{pid}/task"))
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"{task.path}/children", "rb") as handle:
                found.extend(int(child) for child in handle.read().split())
        except OSError:
            continue
    return found


def deprioritize_agents(raylet_pid: int, wanted: set[bytes], timeout_s: float = 10.0) -> int:
    """Move the real agents the raylet starts (``wanted``: their scripts) to the lowest CPU priority; how many it found.

    Each agent spends about 1 CPU-second importing itself, at the very moment the driver,
    the launcher and the first worker import Ray on the same 2 cores. Neither is on an
    element's path: a minimal dashboard agent serves nothing (see
    :func:`declare_unused_agent_ports`), and the runtime-env agent serves only tasks that
    ask for a runtime environment (the raylet does not call it for the empty one).
    Niceness alone is not enough: Ray runs its workers at niceness 15, against which a
    niceness-19 agent still gets about 30% of a shared core, so the agents also get
    Linux's ``SCHED_IDLE`` policy (about 8%). The raylet, the GCS, the launcher and the
    workers keep their priority.
    """
    niced: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while len(niced) < len(wanted) and time.monotonic() < deadline:
        for child in children(raylet_pid):
            if child in niced:
                continue
            try:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    arguments = handle.read().split(b"\0")
                if wanted.intersection(arguments):
                    os.setpriority(os.PRIO_PROCESS, child, AGENT_NICENESS)
                    niced.add(child)
                    with contextlib.suppress(AttributeError, OSError):
                        os.sched_setscheduler(child, os.SCHED_IDLE, os.sched_param(0))
            except OSError:
                continue
        time.sleep(0.01)
    return len(niced)


def fall_back_to_ray_start(flags: Sequence[str], reason: str) -> None:
    print(f"{LAUNCHER_MODULE}: {reason}; {FALLBACK_NOTICE}", file=sys.stderr, flush=True)
    executable = ray_executable()
    os.execvp(executable, [executable, "start", "--block", *flags])


def announce_ready(temp_dir: Path) -> None:
    """Tell the driver the node is registered: Ray's ``Node`` returns only once the GCS lists it.

    ``ray.init`` looks for its local node once, and if the raylet has not registered yet
    it sleeps a whole second before it looks again. A driver that waited for this file
    never takes that sleep; the GCS port answering, much earlier, is no such promise.
    """
    partial = temp_dir / f".{READY_FILE}.partial"
    partial.write_text(f"{os.getpid()}\n")
    os.replace(partial, temp_dir / READY_FILE)


def unexpected_deaths(node) -> list[str]:
    died = [f"{kind} (exit code {process.returncode})" for kind, process in node.dead_processes()
            if process.returncode not in STOPPED_ON_REQUEST]
    monitor = getattr(node, "log_monitor_thread", None)
    if monitor is not None and not monitor.is_alive():
        died.append(f"log monitor thread ({monitor.error!r})")
    return died


def watch(node, poll_s: float = 0.5) -> int:
    """Block like ``ray start --block``; the exit code once a node process died unasked."""
    while not (died := unexpected_deaths(node)):
        time.sleep(poll_s)
    described = ", ".join(died)
    print(f"{LAUNCHER_MODULE}: Ray process died: {described}; stopping the node", file=sys.stderr, flush=True)
    node.kill_all_processes(check_alive=False, allow_graceful=False)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    flags = list(sys.argv[1:] if argv is None else argv)
    try:
        params = ray_params_from_flags(flags)
    except ValueError as exc:  # UnknownFlagError included
        print(f"{LAUNCHER_MODULE}: {exc}", file=sys.stderr)
        return 2
    import ray

    if not in_tested_range(ray.__version__):
        fall_back_to_ray_start(flags, f"Ray {ray.__version__} is outside the releases curator-array was tested on")
    node_class = lean_node_class()
    if node_class is None:
        fall_back_to_ray_start(flags, "this Ray has no ray._private.node.Node as expected")
    from ray._private.parameter import RayParams

    head = "--head" in flags
    if head:
        params["_system_config"] = head_system_config(os.environ)
    try:
        ray_params = RayParams(include_dashboard=False, no_monitor=True, **params)
    except TypeError as exc:
        fall_back_to_ray_start(flags, f"this Ray's RayParams differs ({exc})")
    if not head and ray_params.node_ip_address is None:
        from ray._private.services import get_node_ip_address

        ray_params.node_ip_address = get_node_ip_address(ray_params.gcs_address)
    node = node_class(ray_params, head=head, shutdown_at_exit=True, spawn_reaper=True)
    if head:
        announce_ready(Path(ray_params.temp_dir or node.get_temp_dir_path()))
    role = "Ray head" if head else f"Ray worker node (head {ray_params.gcs_address})"
    print(f"{LAUNCHER_MODULE}: {role} up, GCS at {node.gcs_address}, session {node.get_session_dir_path()}",
          flush=True)
    return watch(node)


if __name__ == "__main__":
    sys.exit(main())

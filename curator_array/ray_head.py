"""A private Ray head without the two processes a fixed, one-element cluster never uses.

``ray start --head`` also starts the dashboard head and the autoscaler monitor, and waits
for the dashboard to come up before it starts the raylet. A cluster that lives for one
array element and never grows has no use for either, yet on a 2-core node they cost about
1 s of every element's start (``bench/bench_startup.py``). This launcher starts the same
GCS, raylet, agents and log monitor through Ray's own ``Node`` class, minus those two, and
then behaves like ``ray start --block``: it stays in the foreground, stops the node on
SIGTERM, and exits non-zero as soon as one of the node's processes dies.

``Node`` is Ray's internal API. Where it is missing or has changed, the launcher replaces
itself with ``ray start --block`` and the same flags, so an unfamiliar Ray costs start-up
time, never correctness. It takes exactly the flags ``spawn_head`` gives ``ray start``::

    python -m curator_array.ray_head --head --port=... --temp-dir=... --num-cpus=...

This module imports nothing from the package: it must start before, and without, the rest.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# ray start flag -> (RayParams field, parser)
PARAMS: dict[str, tuple[str, Callable[[str], object]]] = {
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
    "--resources": ("resources", json.loads),
}
# Meaningful only to the processes this launcher does not start, or already implied.
WITHOUT_EFFECT = {"--head", "--include-dashboard", "--disable-usage-stats", "--dashboard-port", "--dashboard-host"}
# How a node process ends when it was asked to stop (see `ray start --block`).
STOPPED_ON_REQUEST = {0, signal.SIGTERM, -signal.SIGTERM, 128 + signal.SIGTERM}


FALLBACK_NOTICE = "using `ray start --block` instead"


class UnknownFlagError(ValueError):
    pass


def ray_executable() -> str:
    candidate = Path(sys.executable).with_name("ray")
    return str(candidate) if candidate.exists() else "ray"


def ray_params_from_flags(flags: Sequence[str]) -> dict[str, object]:
    """``--flag=value`` arguments of ``ray start --head`` as ``RayParams`` keyword arguments."""
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
        raise UnknownFlagError(f"ray_head does not know {' '.join(unknown)}; teach it in PARAMS or WITHOUT_EFFECT")
    return params


def lean_node_class():
    """Ray's ``Node`` with the dashboard head left out, or ``None`` where Ray's internals differ."""
    try:
        from ray._private.node import Node
    except ImportError:
        return None
    if not callable(getattr(Node, "start_api_server", None)) or not callable(getattr(Node, "dead_processes", None)):
        return None

    class NodeWithoutDashboard(Node):
        def start_api_server(self, *args, **kwargs):
            self._webui_url = ""

    return NodeWithoutDashboard


def fall_back_to_ray_start(flags: Sequence[str], reason: str) -> None:
    print(f"curator_array.ray_head: {reason}; {FALLBACK_NOTICE}", file=sys.stderr, flush=True)
    executable = ray_executable()
    os.execvp(executable, [executable, "start", "--block", *flags])


def watch(node, poll_s: float = 0.5) -> int:
    """Block like ``ray start --block``; the exit code once a node process died unasked."""
    while True:
        time.sleep(poll_s)
        died = [(kind, process.returncode) for kind, process in node.dead_processes()
                if process.returncode not in STOPPED_ON_REQUEST]
        if died:
            described = ", ".join(f"{kind} (exit code {code})" for kind, code in died)
            print(f"curator_array.ray_head: Ray process died: {described}; stopping the node", file=sys.stderr, flush=True)
            node.kill_all_processes(check_alive=False, allow_graceful=False)
            return 1


def main(argv: Sequence[str] | None = None) -> int:
    flags = list(sys.argv[1:] if argv is None else argv)
    try:
        params = ray_params_from_flags(flags)
    except ValueError as exc:  # UnknownFlagError included
        print(f"curator_array.ray_head: {exc}", file=sys.stderr)
        return 2
    node_class = lean_node_class()
    if node_class is None:
        fall_back_to_ray_start(flags, "this Ray has no ray._private.node.Node as expected")
    from ray._private.parameter import RayParams

    try:
        ray_params = RayParams(include_dashboard=False, no_monitor=True, **params)
    except TypeError as exc:
        fall_back_to_ray_start(flags, f"this Ray's RayParams differs ({exc})")
    node = node_class(ray_params, head=True, shutdown_at_exit=True, spawn_reaper=True)
    print(f"curator_array.ray_head: Ray head up, GCS at {node.gcs_address}, session {node.get_session_dir_path()}",
          flush=True)
    return watch(node)


if __name__ == "__main__":
    sys.exit(main())

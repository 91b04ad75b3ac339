"""Start and stop private Ray nodes: one foreground launcher process per node, owned by us.

Every node runs under :mod:`curator_array.execution.ray_internals.launcher`, a launcher that starts what ``ray
start --block`` starts, minus what a one-element cluster never uses. Each cluster gets free
ports, a short temp dir, token auth with its own token file, a sized object store, no
dashboard and no usage stats. Each node runs in a session of its own, so stopping one
signals exactly the processes it started. The Ray CLI's stop command is never used: it
stops every Ray cluster on the host, other users' too.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..core.errors import CuratorArrayError
from .ray_internals import FALLBACK_NOTICE, LAUNCHER_MODULE, READY_FILE

logger = logging.getLogger(__name__)

MiB = 1024 * 1024
MIN_OBJECT_STORE = 75 * MiB
WORKER_PORT_RANGE = 64
# How long the head of a multi-node element waits for every node to join.
WORKER_JOIN_TIMEOUT_S = 300.0
# Below Linux's default ephemeral range (32768-60999), so outgoing connections cannot take them.
PORT_LOW, PORT_HIGH = 10000, 32000
AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")


class RayStartError(CuratorArrayError):
    """A Ray node did not come up."""


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class NodePorts:
    """Every port one Ray node listens on, so two nodes on one host never collide."""

    gcs: int
    node_manager: int
    object_manager: int
    runtime_env_agent: int
    metrics_export: int
    dashboard_agent_grpc: int
    dashboard_agent_listen: int
    dashboard: int
    min_worker: int
    max_worker: int

    @classmethod
    def allocate(cls, rng: random.Random | None = None) -> NodePorts:
        """Pick a random free block; a collision with a concurrent start is retried by the caller."""
        rng = rng or random.SystemRandom()
        singles = 8
        for _ in range(200):
            base = rng.randrange(PORT_LOW, PORT_HIGH - singles - WORKER_PORT_RANGE)
            wanted = range(base, base + singles + WORKER_PORT_RANGE)
            if all(_port_free(p) for p in wanted):
                first_worker = base + singles
                return cls(*range(base, base + singles), first_worker, first_worker + WORKER_PORT_RANGE - 1)
        raise RayStartError(f"no free block of {singles + WORKER_PORT_RANGE} ports in {PORT_LOW}-{PORT_HIGH}")

    def arguments(self, head: bool) -> list[str]:
        args = [
            f"--node-manager-port={self.node_manager}",
            f"--object-manager-port={self.object_manager}",
            f"--runtime-env-agent-port={self.runtime_env_agent}",
            f"--metrics-export-port={self.metrics_export}",
            f"--dashboard-agent-grpc-port={self.dashboard_agent_grpc}",
            f"--dashboard-agent-listen-port={self.dashboard_agent_listen}",
            f"--min-worker-port={self.min_worker}",
            f"--max-worker-port={self.max_worker}",
        ]
        # Even with --include-dashboard=false, Ray runs a minimal dashboard process (usage
        # stats only, no UI); on its fixed default port two clusters on one host would clash.
        head_args = [f"--port={self.gcs}", f"--dashboard-port={self.dashboard}", "--dashboard-host=127.0.0.1"]
        return (head_args if head else []) + args


def object_store_bytes(
    requested: int | None = None,
    job_memory_mb: int | None = None,
    shm_free: int | None = None,
    total_memory: int | None = None,
) -> int:
    """30% of the job's memory (or of RAM), capped by free ``/dev/shm``; at least 75 MiB.

    Ray's default is 30% of *host* RAM per raylet, which overcommits shared nodes and fails
    outright when ``/dev/shm`` is smaller than that.
    """
    if requested is not None:
        return max(int(requested), MIN_OBJECT_STORE)
    if shm_free is None:
        try:
            stat = os.statvfs("/dev/shm")
            shm_free = stat.f_bavail * stat.f_frsize
        except OSError:
            shm_free = 0
    if total_memory is None:
        total_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    budget = 0.3 * (job_memory_mb * MiB if job_memory_mb else total_memory)
    if shm_free:
        budget = min(budget, 0.8 * shm_free)
    return max(int(budget), MIN_OBJECT_STORE)


RAY_OWN_BYTES = 1 << 30  # the raylet, GCS, Ray's agents and the driver, on a node of the job
MIN_WORKER_MEMORY = 100 * MiB  # Ray refuses less


def worker_memory_bytes(job_memory_mb: int | None, object_store: int) -> int | None:
    """Ray's ``memory`` resource of a node whose job has a memory limit: the job's memory less
    the object store and Ray's own processes. Without a limit (None), Ray counts what is free
    when it starts; with one, that count would include the memory of the node's other jobs,
    and actors that reserve a model's memory (``Resources.memory_bytes``) would overcommit it."""
    if not job_memory_mb:
        return None
    return max(MIN_WORKER_MEMORY, job_memory_mb * MiB - object_store - RAY_OWN_BYTES)


def routable_ip() -> str:
    """This host's address on its default route, which other nodes can reach.

    Connecting a UDP socket sends nothing; it only asks the kernel which interface it
    would use. Loopback is the answer on a host without any route.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.254.254.254", 1))
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass
class NodeOptions:
    """Per-node resources; ``custom_resources`` carries e.g. download slots for hard caps."""

    num_cpus: int | None = None
    num_gpus: int | None = None
    object_store_memory: int | None = None
    job_memory_mb: int | None = None
    custom_resources: dict[str, float] = field(default_factory=dict)

    def arguments(self) -> list[str]:
        import json

        object_store = object_store_bytes(self.object_store_memory, self.job_memory_mb)
        args = [
            f"--num-cpus={self.num_cpus if self.num_cpus is not None else available_cpus()}",
            f"--object-store-memory={object_store}",
        ]
        workers = worker_memory_bytes(self.job_memory_mb, object_store)
        if workers is not None:
            args.append(f"--memory={workers}")
        if self.num_gpus is not None:
            args.append(f"--num-gpus={self.num_gpus}")
        if self.custom_resources:
            args.append(f"--resources={json.dumps(self.custom_resources, sort_keys=True)}")
        return args


def new_session_dir(parent: str | os.PathLike | None = None) -> Path:
    """A short, private temp dir: Ray's Unix socket paths must stay under 107 bytes."""
    root = Path(parent) if parent else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="ca-", dir=root))
    if len(str(path / "session_2000-01-01_00-00-00_000000_00000/sockets/plasma_store")) > 107:
        shutil.rmtree(path, ignore_errors=True)
        raise RayStartError(
            f"temp dir {path} is too long for Ray's Unix sockets (107 bytes); set TMPDIR to a shorter path"
        )
    return path


def write_token(path: Path, token: str | None = None) -> Path:
    """Write an auth token readable by the owner only (created 0600, never widened)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token or secrets.token_hex(32))
    return path


def ray_environment(token_path: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for every process of one cluster: token auth on, telemetry off."""
    env = dict(base if base is not None else os.environ)
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(token_path),
        RAY_USAGE_STATS_ENABLED="0",
        RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",
    )
    # Stages of a user pipeline loaded from the working directory must import on workers too.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
    return env


def _prepare_node_process() -> None:
    """In the child before exec: tie the node's lifetime to the driver's.

    SIGTERM when the process that started us dies: a driver killed with SIGKILL (OOM
    killer, scancel --signal=KILL) cannot stop its cluster, so the node's launcher does.
    SIGUSR1 ignored (inherited by every Ray process): SLURM delivers the time-limit warning
    to every process of the step, and only the driver should react, by stopping this node.
    """
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def launcher_command(args: list[str]) -> list[str]:
    """The node launcher (:mod:`curator_array.execution.ray_internals.launcher`) for head and worker nodes alike."""
    return [sys.executable, "-m", LAUNCHER_MODULE, *args]


class RayNodeProcess:
    """One node launcher we started (see :func:`launcher_command`), with everything it spawned in one session."""

    def __init__(self, command: list[str], env: Mapping[str, str], log_path: Path, node_ip: str | None):
        self.log_path = log_path
        self.node_ip = node_ip
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                command,
                env=dict(env),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_prepare_node_process if sys.platform.startswith("linux") else None,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def raise_if_exited(self) -> None:
        if not self.running():
            raise RayStartError(f"the Ray node exited with code {self.process.returncode}:\n{self.log_tail()}")

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def members(self) -> list[int]:
        """Live (non-zombie) processes of the session we created for this node.

        Ray workers move to process groups of their own but stay in our session, so the
        session, not the group, is what identifies everything this node started.
        """
        return session_members(self.pid)

    def stop(self, grace_s: float = 1.0, timeout_s: float = 10.0) -> float:
        """SIGTERM the session, SIGKILL what is left after ``grace_s``; returns seconds taken.

        Only processes of our own session are signalled. The driver's results are already
        safe on disk when this runs, so a fast kill loses nothing.
        """
        start = time.monotonic()
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, timeout_s)):
            for pid in self.members():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.members():
                self.process.poll()
                time.sleep(0.05)
            if not self.members():
                break
        self.process.poll()
        return time.monotonic() - start


def live_process_stats() -> Iterator[tuple[int, list[bytes]]]:
    """Each live (non-zombie) process: its pid and the fields of ``/proc/<pid>/stat`` after its name."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X"):
            yield int(entry.name), fields


def session_members(session_id: int) -> list[int]:
    """Non-zombie pids whose session id is ``session_id`` (Linux ``/proc``)."""
    return [pid for pid, fields in live_process_stats() if int(fields[3]) == session_id]


def wait_for_port(host: str, port: int, node: RayNodeProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        node.raise_if_exited()
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RayStartError(f"Ray GCS at {host}:{port} did not come up within {timeout_s:.0f}s:\n{node.log_tail()}")


def wait_for_head(node: RayNodeProcess, session_dir: Path, host: str, port: int, timeout_s: float) -> None:
    """Until the head launcher reports its node registered, so ``ray.init`` finds it at once.

    After a fallback to ``ray start`` (see :mod:`curator_array.execution.ray_internals.launcher`) no report comes;
    then the GCS port answering is the signal, as with ``ray start`` anywhere.
    """
    deadline = time.monotonic() + timeout_s
    ready = session_dir / READY_FILE
    log_size_seen = 0
    while time.monotonic() < deadline:
        if ready.exists():
            return
        node.raise_if_exited()
        if (log_size := node.log_size()) != log_size_seen:  # read the log only when it grew
            log_size_seen = log_size
            if FALLBACK_NOTICE in node.log_tail(40):
                return wait_for_port(host, port, node, max(0.0, deadline - time.monotonic()))
        time.sleep(0.02)
    raise RayStartError(f"the Ray head did not come up within {timeout_s:.0f}s:\n{node.log_tail()}")


def head_arguments(session_dir: Path, ports: NodePorts, options: NodeOptions, node_ip: str | None = None) -> list[str]:
    """Flags of a head node, as ``ray start`` spells them (the head launcher reads the same)."""
    return [
        "--head",
        *([f"--node-ip-address={node_ip}"] if node_ip else []),
        f"--temp-dir={session_dir}",
        "--include-dashboard=false",
        "--disable-usage-stats",
        *ports.arguments(head=True),
        *options.arguments(),
    ]


def spawn_head(
    session_dir: Path, token_path: Path, options: NodeOptions, node_ip: str | None = None
) -> tuple[RayNodeProcess, str]:
    """Spawn a head node without waiting for it; returns it and its ``ip:port`` address.

    Without ``node_ip`` Ray advertises the host's reachable address (it rewrites loopback
    on purpose); the GCS listens on every interface, which is why token auth is always on.
    """
    ports = NodePorts.allocate()
    args = head_arguments(session_dir, ports, options, node_ip)
    node = RayNodeProcess(launcher_command(args), ray_environment(token_path), session_dir / "ray-head.log", node_ip)
    return node, f"{node_ip or '127.0.0.1'}:{ports.gcs}"


class LaunchedHead(NamedTuple):
    session_dir: Path
    token_path: Path
    process: RayNodeProcess
    address: str


def launch_head(options: NodeOptions, temp_root: str | os.PathLike | None = None, token_path: Path | None = None,
                node_ip: str | None = None) -> LaunchedHead:
    """A head spawned in a new private session dir with a new token (in that dir, or at
    ``token_path`` where the job's other nodes read it), not waited for (``start_head``)."""
    session_dir = new_session_dir(temp_root)
    token = write_token(token_path or session_dir / "auth_token")
    return LaunchedHead(session_dir, token, *spawn_head(session_dir, token, options, node_ip))


def start_head(
    session_dir: Path,
    token_path: Path,
    options: NodeOptions,
    node_ip: str | None = None,
    timeout_s: float = 60.0,
    attempts: int = 3,
    spawned: tuple[RayNodeProcess, str] | None = None,
) -> tuple[RayNodeProcess, str]:
    """A head that answers: ``spawned`` (from :func:`spawn_head`) or a new one; port races
    (another cluster took a port between choosing and binding) are retried."""
    last_error: Exception | None = None
    for attempt in range(attempts):
        node, address = spawned if attempt == 0 and spawned else spawn_head(session_dir, token_path, options, node_ip)
        host, _, port = address.rpartition(":")
        try:
            wait_for_head(node, session_dir, host, int(port), timeout_s)
            report_fallback(node)
            return node, address
        except RayStartError as exc:
            last_error = exc
            node.stop()
    raise RayStartError(f"could not start a Ray head after {attempts} attempts: {last_error}")


def report_fallback(node: RayNodeProcess, role: str = "Ray head") -> None:
    """A node's log is removed after a clean run; a slower start-up should still be seen."""
    for line in node.log_tail(40).splitlines():
        if FALLBACK_NOTICE in line:
            logger.warning("%s: %s", role, line.removeprefix(f"{LAUNCHER_MODULE}: "))


def start_worker(
    address: str,
    session_dir: Path,
    token_path: Path,
    options: NodeOptions,
    node_ip: str | None = None,
    log_name: str = "ray-worker.log",
) -> RayNodeProcess:
    """Join an existing head as one more node (its own ports, so it can share a host)."""
    args = worker_arguments(address, session_dir, NodePorts.allocate(), options, node_ip)
    return RayNodeProcess(launcher_command(args), ray_environment(token_path), session_dir / log_name, node_ip)


def worker_arguments(
    address: str, session_dir: Path, ports: NodePorts, options: NodeOptions, node_ip: str | None = None
) -> list[str]:
    """Flags of a node joining ``address``, as ``ray start`` spells them (the launcher reads the same)."""
    return [
        f"--address={address}",
        *([f"--node-ip-address={node_ip}"] if node_ip else []),
        f"--temp-dir={session_dir}",
        "--disable-usage-stats",
        *ports.arguments(head=False),
        *options.arguments(),
    ]

"""Ray clients: the Ray cluster one shard's driver owns for one run.

``RayClusterClient`` is the interface the run uses, whatever the cluster's shape:

* ``launch()`` begins starting the cluster and returns at once, so the cluster boots while
  the driver imports Ray Data and prepares its shard;
* ``start()`` waits until the cluster is up and connects this process as its driver;
* ``lost_nodes()`` says how many of the nodes it started with have died since;
* ``stop(keep_logs)`` stops exactly what ``launch``/``start`` started (a launched head
  that was never used included) and releases any other nodes; it may be called at any
  point, more than once.

``RayClient`` runs everything on one node (or connects to a cluster someone else runs);
``SlurmRayClient`` (in ``slurm_client``) spans the nodes of a multi-node array element.
As context managers both start on entry and stop on exit.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from .ray_cluster import (
    AUTH_ENV,
    NodeOptions,
    RayNodeProcess,
    launch_head,
    start_head,
)
from .ray_internals import reload_ray_auth

logger = logging.getLogger(__name__)

# The client whose cluster this process drives now, if one of ours started it (see drives_own_cluster).
_driving: RayClusterClient | None = None


def drives_own_cluster() -> bool:
    """Whether this process is the driver of a cluster one of our clients started: of fixed
    size, with nothing else on it. A notebook or test that runs a shard on its own
    ``RayClient`` then runs it as ``curator-array run`` does (``RayDataExecutor``)."""
    import ray

    return _driving is not None and _driving.owns_cluster and ray.is_initialized()


def connect_driver(address: str, on_connect: Callable[[], None] | None = None) -> None:
    """Connect this process to the cluster as its driver.

    ``on_connect`` runs right after ``ray.init`` (the run's stop controller takes its signal
    handlers back there). Usage stats stay off in the driver too: Ray Data reports them
    through an actor it creates when a run ends, which hangs for a minute if the cluster is
    already dying.
    """
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True)
    if on_connect is not None:
        on_connect()


def alive_nodes() -> int:
    import ray

    return sum(1 for n in ray.nodes() if n.get("Alive"))


class RayClusterClient(ABC):
    """The lifetime of one private Ray cluster, owned by one driver (see the module doc).

    The shared parts live here: the driver's token environment, the nodes this client
    started (stopped by signalling only their own sessions) and their session directory,
    which is removed after a clean run and kept, with its path logged, after an error.
    """

    def __init__(
        self,
        *,
        node_options: NodeOptions | None = None,
        temp_root: str | os.PathLike | None = None,
        on_connect: Callable[[], None] | None = None,
    ):
        self.node_options = node_options or NodeOptions()
        self.temp_root = temp_root
        self.on_connect = on_connect
        self.address: str | None = None
        self.head: RayNodeProcess | None = None
        self.session_dir: Path | None = None
        self.token_path: Path | None = None
        self.extra_nodes: list[RayNodeProcess] = []
        self.expected_nodes = 1
        self.started = False
        self.owns_cluster = True  # we started every node: nothing else runs on it and it never autoscales
        self.startup_s: float | None = None
        self.teardown_s: float | None = None
        self._saved_env: dict[str, str | None] = {}

    @abstractmethod
    def launch(self) -> None:
        """Begin starting the cluster; return without waiting for it."""

    def start(self) -> RayClusterClient:
        """Wait for the cluster and connect this process to it as the driver."""
        global _driving
        self.started = True
        self._start()
        _driving = self
        return self

    @abstractmethod
    def _start(self) -> None:
        """What ``start`` does for this kind of cluster."""

    def lost_nodes(self) -> int:
        """How many of the nodes the cluster had at start are no longer alive."""
        return max(0, self.expected_nodes - alive_nodes())

    def stop(self, keep_logs: bool = False) -> None:
        """Disconnect, stop the nodes this client started, and restore the environment."""
        import ray

        global _driving
        began = time.monotonic()
        _driving = None
        if ray.is_initialized():
            ray.shutdown()
        for node in [*self.extra_nodes, self.head]:
            if node is not None:
                # Results are on disk by now: after a clean run kill at once; after an
                # error give Ray a moment to flush the logs that are kept.
                node.stop(grace_s=1.0 if keep_logs else 0.0)
        self._restore_env()
        if self.session_dir is not None and self.session_dir.exists():
            if keep_logs:
                logger.warning("Ray logs kept in %s", self.session_dir)
            else:
                shutil.rmtree(self.session_dir, ignore_errors=True)
        self.teardown_s = time.monotonic() - began

    def _set_auth_env(self) -> None:
        """The driver (this process) must present the cluster's token to connect."""
        if self.token_path is None:
            raise RuntimeError("the cluster has no token yet: launch() it first")
        for name in AUTH_ENV:
            self._saved_env.setdefault(name, os.environ.get(name))
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(self.token_path)
        reload_ray_auth()

    def _restore_env(self) -> None:
        if not self._saved_env:
            return
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()
        reload_ray_auth()

    def __enter__(self) -> RayClusterClient:
        try:
            return self.start()
        except BaseException:
            self.stop(keep_logs=True)
            raise

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop(keep_logs=exc_type is not None)


class RayClient(RayClusterClient):
    """A private single-node Ray cluster, or a connection to an existing one.

    With ``address`` (e.g. from ``RAY_ADDRESS``) it only connects and never stops that
    cluster. Otherwise it starts a head with free ports, a short temp dir under
    ``temp_root`` and a fresh auth token.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        node_options: NodeOptions | None = None,
        temp_root: str | os.PathLike | None = None,
        start_timeout_s: float = 60.0,
        on_connect: Callable[[], None] | None = None,
    ):
        super().__init__(node_options=node_options, temp_root=temp_root, on_connect=on_connect)
        self.address = address
        self.owns_cluster = address is None
        self.start_timeout_s = start_timeout_s
        self._launched_at: float | None = None

    def launch(self) -> None:
        """Spawn the private head now; a cluster we only connect to needs nothing."""
        if not self.owns_cluster or self.head is not None:
            return
        self._launched_at = time.monotonic()
        self.session_dir, self.token_path, self.head, self.address = launch_head(self.node_options, self.temp_root)

    def _start(self) -> None:
        began = self._launched_at or time.monotonic()
        if self.owns_cluster:
            self.launch()
            self.head, self.address = start_head(
                self.session_dir, self.token_path, self.node_options, timeout_s=self.start_timeout_s,
                spawned=(self.head, self.address),
            )
            self._set_auth_env()
            logger.info("started a private Ray head at %s (session dir %s)", self.address, self.session_dir)
        connect_driver(self.address, self.on_connect)
        self.expected_nodes = alive_nodes()
        self.startup_s = time.monotonic() - began

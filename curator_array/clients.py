"""Ray clients: own a private Ray cluster for the lifetime of one array task.

``RayClient`` runs everything on one node. ``SlurmRayClient`` (in ``slurm_client``) spans
the nodes of a multi-node array element. Both are context managers: the cluster exists
exactly inside the ``with`` block, and leaving it stops only what was started.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from .ray_cluster import (
    AUTH_ENV,
    NodeOptions,
    RayNodeProcess,
    new_session_dir,
    spawn_head,
    start_head,
    write_token,
)

logger = logging.getLogger(__name__)


def reload_ray_auth() -> None:
    """Make an already-imported Ray re-read RAY_AUTH_* (it caches them on first use).

    Needed when one process talks to several clusters in turn, each with its own token.
    """
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # older or newer Ray without these hooks: env is read at init
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


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


class RayClient:
    """A private single-node Ray cluster, or a connection to an existing one.

    With ``address`` (e.g. from ``RAY_ADDRESS``) it only connects and never stops that
    cluster. Otherwise it starts a head with free ports, a short temp dir under
    ``temp_root`` and a fresh auth token, and stops it on exit. Its session directory (Ray
    logs) is removed after a clean exit and kept, with its path logged, after an error.
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
        self.address = address
        self.on_connect = on_connect
        self.node_options = node_options or NodeOptions()
        self.temp_root = temp_root
        self.start_timeout_s = start_timeout_s
        self.owns_cluster = address is None
        self.head: RayNodeProcess | None = None
        self.session_dir: Path | None = None
        self.token_path: Path | None = None
        self.extra_nodes: list[RayNodeProcess] = []
        self.startup_s: float | None = None
        self.teardown_s: float | None = None
        self._saved_env: dict[str, str | None] = {}
        self._launched_at: float | None = None

    def launch(self) -> None:
        """Spawn the private head now without waiting for it.

        A head takes seconds to boot; the driver spends about as long importing Ray Data and
        preparing its shard. Launched first, the two overlap. ``start`` then waits for it.
        """
        if not self.owns_cluster or self.head is not None:
            return
        self._launched_at = time.monotonic()
        self.session_dir = new_session_dir(self.temp_root)
        self.token_path = write_token(self.session_dir / "auth_token")
        self.head, self.address = spawn_head(self.session_dir, self.token_path, self.node_options)

    def start(self) -> RayClient:
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
        self.startup_s = time.monotonic() - began
        return self

    def _set_auth_env(self) -> None:
        """The driver (this process) must present the cluster's token to connect."""
        assert self.token_path is not None
        for name in AUTH_ENV:
            self._saved_env[name] = os.environ.get(name)
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(self.token_path)
        reload_ray_auth()

    def _restore_env(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()
        reload_ray_auth()

    def finish(self, status: str) -> None:
        """Announce that the driver is done without having started Ray (one node: nothing to do)."""

    def stop(self, keep_logs: bool = False) -> None:
        import ray

        began = time.monotonic()
        if ray.is_initialized():
            ray.shutdown()
        if self.owns_cluster:
            for node in [*self.extra_nodes, self.head]:
                if node is not None:
                    # Results are on disk by now: after a clean run kill at once; after an
                    # error give Ray a moment to flush the logs that are kept.
                    node.stop(grace_s=1.0 if keep_logs else 0.0)
            self._restore_env()
            if self.session_dir is not None:
                if keep_logs:
                    logger.warning("Ray logs kept in %s", self.session_dir)
                else:
                    shutil.rmtree(self.session_dir, ignore_errors=True)
        self.teardown_s = time.monotonic() - began

    def __enter__(self) -> RayClient:
        try:
            return self.start()
        except BaseException:
            self.stop(keep_logs=True)
            raise

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop(keep_logs=exc_type is not None)

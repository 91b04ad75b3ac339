"""``SlurmRayClient``: one Ray cluster spanning the nodes of one multi-node array element.

Node 0 starts the head and is the driver; the other nodes join and block until the
driver is done. They meet through a rendezvous directory on shared storage (by default
under the checkpoint's metadata dir, never node-local /tmp), unique per job, step and
restart:

    nodes/node_<N>  taken by the process that is node N, when the runtime hides SLURM_NODEID
    head.json    the head's address (written atomically once the head is up)
    auth_token   the cluster's token, mode 0600 (removed when the run ends)
    joined_<N>   node N's raylet is up
    done.json    the driver finished (workers then stop their node and exit 0)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.atomic import dump_json, write_bytes_atomic, write_json_atomic
from ..core.errors import ConfigError
from ..slurm.commands import hostnames
from ..slurm.jobenv import JobEnvironment
from .clients import RayClusterClient, alive_nodes, connect_driver
from .ray_cluster import (
    WORKER_JOIN_TIMEOUT_S,
    NodeOptions,
    RayNodeProcess,
    RayStartError,
    launch_head,
    new_session_dir,
    report_fallback,
    routable_ip,
    start_head,
    start_worker,
)

logger = logging.getLogger(__name__)

# How often the driver and the joining nodes look again while the cluster forms: each
# look is one small GCS call or one file check, and a node joins in well under a second.
JOIN_POLL_S = 0.1


class Rendezvous:
    def __init__(self, directory: Path):
        self.directory = Path(directory)

    @classmethod
    def for_job(cls, root: Path, job: JobEnvironment) -> Rendezvous:
        name = f"slurm_job_{job.job_id or 'local'}_step_{job.step_id or 'batch'}_restart_{job.restart_count}"
        return cls(Path(root) / name)

    @property
    def head_file(self) -> Path:
        return self.directory / "head.json"

    @property
    def token_file(self) -> Path:
        return self.directory / "auth_token"

    @property
    def done_file(self) -> Path:
        return self.directory / "done.json"

    def joined_file(self, node_id: int) -> Path:
        return self.directory / f"joined_{node_id}.json"

    def claim_node(self, num_nodes: int, who: dict[str, Any]) -> int:
        """This process's node index when its runtime hides it (SLURM's ``--container`` passes
        no task-level variable, and nodes on one host may share a hostname): the first of
        0..N-1 not yet taken, each taken by an exclusive create, so exactly one process is
        node 0 (the head and driver)."""
        claims = self.directory / "nodes"
        claims.mkdir(parents=True, exist_ok=True)
        for index in range(num_nodes):
            try:
                handle = os.open(claims / f"node_{index}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(handle, "wb") as claim:
                claim.write(dump_json(who))
            return index
        raise ConfigError(
            f"every node index of this step (0-{num_nodes - 1}) is taken in {claims}: more processes started "
            f"than the job has nodes; launch one task per node (srun --ntasks-per-node=1)"
        )

    def prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        for stale in (self.head_file, self.done_file, self.token_file, *self.directory.glob("joined_*.json")):
            stale.unlink(missing_ok=True)

    def publish_head(self, address: str) -> None:
        write_json_atomic(self.head_file, {"address": address, "published_at": time.time()})

    def finish(self, status: str) -> None:
        """Tell workers the driver is done; the token is useless from now on, so remove it."""
        if not self.directory.is_dir():
            return
        write_json_atomic(self.done_file, {"status": status, "finished_at": time.time()})
        self.token_file.unlink(missing_ok=True)
        self.head_file.unlink(missing_ok=True)

    def read(self, path: Path) -> dict[str, Any] | None:
        try:
            return json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None


def _gcs_reachable(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return True
    except OSError:
        return False


class SlurmRayClient(RayClusterClient):
    """The driver's side (node 0) of a cluster over the job's nodes.

    ``launch`` starts the head; ``start`` publishes it in the rendezvous directory, connects
    and waits for every node (``SlurmWorkerNode`` on the others); ``stop`` tells the other
    nodes the driver is done, whether or not the cluster was ever used.
    """

    def __init__(
        self,
        job: JobEnvironment,
        rendezvous_root: str | os.PathLike,
        *,
        node_options: NodeOptions | None = None,
        temp_root: str | os.PathLike | None = None,
        join_timeout_s: float = WORKER_JOIN_TIMEOUT_S,
        node_ip: str | None = None,
        on_connect: Callable[[], None] | None = None,
    ):
        super().__init__(node_options=node_options, temp_root=temp_root, on_connect=on_connect)
        self.node_ip = node_ip or routable_ip()
        self.job = job
        self.rendezvous = Rendezvous.for_job(Path(rendezvous_root), job)
        self.join_timeout_s = join_timeout_s
        self.expected_nodes = job.num_nodes
        self.node_names = hostnames(job.nodelist) if job.nodelist else [f"node {i}" for i in range(job.num_nodes)]
        self._launched_at: float | None = None

    def launch(self) -> None:
        if self.head is not None:
            return
        self._launched_at = time.monotonic()
        self.rendezvous.prepare()
        self.session_dir, self.token_path, self.head, self.address = launch_head(
            self.node_options, self.temp_root, self.rendezvous.token_file, self.node_ip)

    def _start(self) -> None:
        self.launch()
        began = self._launched_at or time.monotonic()
        self.head, self.address = start_head(
            self.session_dir, self.token_path, self.node_options, node_ip=self.node_ip,
            spawned=(self.head, self.address),
        )
        self._set_auth_env()
        self.rendezvous.publish_head(self.address)
        logger.info("Ray head at %s; waiting for %d worker node(s) to join", self.address, self.expected_nodes - 1)
        connect_driver(self.address, self.on_connect)
        self._wait_for_nodes()
        self.startup_s = time.monotonic() - began

    def _wait_for_nodes(self) -> None:
        deadline = time.monotonic() + self.join_timeout_s
        while True:
            alive = alive_nodes()
            if alive >= self.expected_nodes:
                return
            if time.monotonic() > deadline:
                missing = [
                    self.node_names[i] if i < len(self.node_names) else f"node {i}"
                    for i in range(1, self.expected_nodes)
                    if not self.rendezvous.joined_file(i).exists()
                ]
                detail = (
                    f"never started: {', '.join(missing)}" if missing
                    else "every node started its raylet but not all registered"
                )
                raise RayStartError(
                    f"only {alive} of {self.expected_nodes} nodes joined the Ray cluster within "
                    f"{self.join_timeout_s:.0f}s ({detail}); see the job output of those nodes"
                )
            time.sleep(JOIN_POLL_S)

    def stop(self, keep_logs: bool = False) -> None:
        """Release the other nodes first (they stop their own Ray node), then stop ours."""
        self.rendezvous.finish("failed" if keep_logs else "ok")
        super().stop(keep_logs=keep_logs)


class SlurmWorkerNode:
    """A node other than 0 of a multi-node element: join the head, serve until the driver is done."""

    def __init__(
        self,
        job: JobEnvironment,
        rendezvous_root: str | os.PathLike,
        *,
        node_options: NodeOptions | None = None,
        temp_root: str | os.PathLike | None = None,
        join_timeout_s: float = WORKER_JOIN_TIMEOUT_S,
        head_lost_after_s: float = 10.0,
        node_ip: str | None = None,
    ):
        self.job = job
        self.rendezvous = Rendezvous.for_job(Path(rendezvous_root), job)
        self.node_options = node_options or NodeOptions()
        self.temp_root = temp_root
        self.join_timeout_s = join_timeout_s
        self.head_lost_after_s = head_lost_after_s
        self.node_ip = node_ip or routable_ip()

    def run(self) -> int:
        """Join the head, block until the driver is done; 0 then, 1 if the head vanished."""
        head = self._wait_for_head()
        if head is None:
            logger.info("the driver finished before this node joined; nothing to do")
            return 0
        token_copy = None
        node: RayNodeProcess | None = None
        session = new_session_dir(self.temp_root)
        try:
            token_copy = session / "auth_token"
            shutil.copyfile(self.rendezvous.token_file, token_copy)
            os.chmod(token_copy, 0o600)
            node = start_worker(head["address"], session, token_copy, self.node_options, node_ip=self.node_ip)
            self._mark_joined(head["address"], node)
            return self._block(head["address"], node)
        except FileNotFoundError:
            return 0 if self.rendezvous.done_file.exists() else 1
        finally:
            if node is not None:
                report_fallback(node, "Ray worker node")
                node.stop()
            shutil.rmtree(session, ignore_errors=True)

    def _wait_for_head(self) -> dict[str, Any] | None:
        deadline = time.monotonic() + self.join_timeout_s
        while time.monotonic() < deadline:
            if self.rendezvous.done_file.exists():
                return None
            head = self.rendezvous.read(self.rendezvous.head_file)
            if head and self.rendezvous.token_file.exists():
                return head
            time.sleep(JOIN_POLL_S)
        raise RayStartError(
            f"no Ray head published in {self.rendezvous.directory} within {self.join_timeout_s:.0f}s: "
            "did node 0 start? is the directory on storage shared by all nodes?"
        )

    def _mark_joined(self, address: str, node: RayNodeProcess) -> None:
        """Record that this node launched its raylet, so a head timeout can name who is missing."""
        write_bytes_atomic(
            self.rendezvous.joined_file(self.job.node_id),
            dump_json({"node_name": self.job.node_name, "hostname": self.job.hostname, "head": address, "pid": node.pid}),
        )
        logger.info("node %s is joining the Ray cluster at %s", self.job.node_name or self.job.node_id, address)

    def _block(self, address: str, node: RayNodeProcess) -> int:
        unreachable_since = None
        while True:
            if self.rendezvous.done_file.exists():
                return 0
            if not node.running():
                logger.error("this node's Ray processes exited before the driver finished:\n%s", node.log_tail())
                return 1
            if _gcs_reachable(address):
                unreachable_since = None
            else:
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > self.head_lost_after_s:
                    if self.rendezvous.done_file.exists():
                        return 0
                    logger.error("the Ray head at %s vanished before the driver finished", address)
                    return 1
            time.sleep(0.5)


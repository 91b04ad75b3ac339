"""The SLURM job environment, parsed once into a frozen object.

Everything else receives a ``JobEnvironment`` instead of reading ``os.environ``, so the
rules for each variable (and their error messages) live in exactly one place.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..core.errors import ConfigError
from ..core.layout import AttemptId
from ..core.records.attempt import JobIdentity


def env_int(env: Mapping[str, str], name: str, *, minimum: int | None = None) -> int | None:
    """An integer variable, None when unset or empty; errors name the variable and value."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={value} must be >= {minimum}")
    return value


def env_str(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name)
    return raw if raw not in (None, "") else None


def _mem_per_node_mb(env: Mapping[str, str]) -> int | None:
    """``SLURM_MEM_PER_NODE`` is in MiB; ``--mem-per-cpu`` jobs get it as per-CPU × CPUs."""
    per_node = env_int(env, "SLURM_MEM_PER_NODE", minimum=0)
    if per_node:
        return per_node
    per_cpu = env_int(env, "SLURM_MEM_PER_CPU", minimum=0)
    cpus = env_int(env, "SLURM_CPUS_ON_NODE", minimum=1)
    if per_cpu and cpus:
        return per_cpu * cpus
    return None


@dataclass(frozen=True)
class JobEnvironment:
    """What SLURM told this process about its job (all None/defaults outside SLURM)."""

    job_id: str | None = None
    step_id: str | None = None
    array_job_id: str | None = None
    array_task_id: int | None = None
    array_task_count: int | None = None
    restart_count: int = 0
    num_nodes: int = 1
    node_id: int | None = 0
    nodelist: str | None = None
    node_name: str | None = None
    cpus_on_node: int | None = None
    cpus_per_task: int | None = None
    gpus_on_node: int | None = None
    mem_per_node_mb: int | None = None
    hostname: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str], hostname: str | None = None) -> JobEnvironment:
        num_nodes = env_int(env, "SLURM_JOB_NUM_NODES", minimum=1)
        if num_nodes is None:
            num_nodes = env_int(env, "SLURM_NNODES", minimum=1)
        resolved_nodes = num_nodes or 1
        node_id = env_int(env, "SLURM_NODEID", minimum=0)
        if node_id is None and resolved_nodes == 1:
            node_id = 0
        if node_id is not None and node_id >= resolved_nodes:
            raise ConfigError(
                f"SLURM_NODEID={node_id} is not below the job's node count {resolved_nodes}"
            )
        return cls(
            job_id=env_str(env, "SLURM_JOB_ID"),
            step_id=env_str(env, "SLURM_STEP_ID"),
            array_job_id=env_str(env, "SLURM_ARRAY_JOB_ID"),
            array_task_id=env_int(env, "SLURM_ARRAY_TASK_ID", minimum=0),
            array_task_count=env_int(env, "SLURM_ARRAY_TASK_COUNT", minimum=1),
            restart_count=env_int(env, "SLURM_RESTART_COUNT", minimum=0) or 0,
            num_nodes=resolved_nodes,
            node_id=node_id,
            nodelist=env_str(env, "SLURM_JOB_NODELIST") or env_str(env, "SLURM_NODELIST"),
            node_name=env_str(env, "SLURMD_NODENAME"),
            cpus_on_node=env_int(env, "SLURM_CPUS_ON_NODE", minimum=1),
            cpus_per_task=env_int(env, "SLURM_CPUS_PER_TASK", minimum=1),
            gpus_on_node=env_int(env, "SLURM_GPUS_ON_NODE", minimum=0),
            mem_per_node_mb=_mem_per_node_mb(env),
            hostname=hostname if hostname is not None else socket.gethostname(),
        )

    @property
    def in_slurm(self) -> bool:
        return self.job_id is not None

    @property
    def is_driver(self) -> bool:
        return self.node_id == 0

    @property
    def node_known(self) -> bool:
        """False on a node of a multi-node job whose runtime hides the task's variables
        (SLURM's ``--container`` passes no ``SLURM_NODEID``): the rendezvous then numbers it."""
        return self.node_id is not None

    def on_node(self, node_id: int) -> JobEnvironment:
        return replace(self, node_id=node_id)

    def identity(self) -> JobIdentity:
        """The identity fields recorded in manifests and attempt records."""
        return JobIdentity(
            slurm_job_id=self.job_id,
            slurm_array_job_id=self.array_job_id,
            slurm_array_task_id=self.array_task_id,
            slurm_restart_count=self.restart_count,
            slurm_node_name=self.node_name,
            slurm_nodelist=self.nodelist,
            slurm_num_nodes=self.num_nodes,
            hostname=self.hostname,
        )

    def attempt_id(self, local_id: str | None = None) -> AttemptId:
        """This try at a shard: the SLURM job, array task and restart, or a local stamp."""
        if self.in_slurm:
            array_task = "none" if self.array_task_id is None else str(self.array_task_id)
            return AttemptId((f"slurm_job_{self.job_id}", f"array_task_{array_task}", f"restart_{self.restart_count}"))
        if local_id is None:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            local_id = f"{stamp}-{self.hostname or 'host'}-{os.getpid()}"
        return AttemptId((f"local_attempt_{local_id}",))

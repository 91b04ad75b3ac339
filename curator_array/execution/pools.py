"""How many workers a stage gets: a pure decision, logged with its reason.

Kept apart from the Ray adapter so the rule (``max(1, ceil(per_node × nodes))``, head
excluded when it runs no workers) can be tested without a cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.errors import ConfigError
from ..stages.base import RayStageSpec

GiB = 2**30


@dataclass(frozen=True)
class ClusterShape:
    alive_nodes: int
    head_runs_workers: bool = True
    total_cpus: float = 1.0
    node_memory: tuple[float, ...] = ()  # each node's memory for workers (Ray's ``memory`` resource), bytes

    @property
    def worker_nodes(self) -> int:
        """Nodes that can run stage workers (a CPU-less, GPU-less head does not count)."""
        return max(1, self.alive_nodes - (0 if self.head_runs_workers else 1))


@dataclass(frozen=True)
class PoolChoice:
    actor: bool
    size: int | None = None
    min_size: int | None = None
    max_size: int | None = None
    initial_size: int | None = None
    reason: str = ""

    def describe(self) -> str:
        kind = "actor pool" if self.actor else "task pool"
        if self.size is not None:
            return f"{kind} of {self.size} ({self.reason})"
        if self.max_size is not None:
            return f"{kind} of {self.min_size}..{self.max_size} ({self.reason})"
        return f"{kind}, Ray Data default sizing ({self.reason})"


def choose_pool(
    spec: RayStageSpec, cpus_per_worker: float, shape: ClusterShape, inputs: int | None = None,
    memory_per_worker: int = 0,
) -> PoolChoice:
    """The pool of one stage; ``inputs`` (the blocks the shard starts with) bounds how many
    actors an unsized actor pool starts with; ``memory_per_worker`` (a model each actor
    loads) bounds how many fit on the nodes, and a node that cannot hold one is refused."""
    if spec.num_workers is not None:
        return PoolChoice(spec.is_actor_stage, size=spec.num_workers, reason=f"num_workers={spec.num_workers}")
    if spec.num_workers_per_node is not None:
        nodes = shape.worker_nodes
        size = max(1, math.ceil(spec.num_workers_per_node * nodes))
        head_note = "" if shape.head_runs_workers else "; head excluded, it runs no workers"
        return PoolChoice(
            spec.is_actor_stage,
            size=size,
            reason=f"num_workers_per_node={spec.num_workers_per_node:g} x {nodes} node(s){head_note}",
        )
    if spec.is_actor_stage:
        fit = int(shape.total_cpus // cpus_per_worker) if cpus_per_worker > 0 else int(shape.total_cpus)
        bound = f"cluster CPUs / {cpus_per_worker:g}"
        by_memory = memory_fit(memory_per_worker, shape)
        if by_memory is not None and by_memory < fit:
            fit, bound = by_memory, f"the nodes' memory / {memory_per_worker / GiB:.2f} GiB"
        high = max(1, fit)
        # Start as large as the work allows: an actor added later pays its set-up only after
        # the pool proved short; idle actors are still given back down to one.
        initial = high if inputs is None else max(1, min(high, inputs))
        return PoolChoice(True, min_size=1, max_size=high, initial_size=initial,
                          reason=f"autoscaling up to {bound}, starting with {initial}")
    return PoolChoice(False, reason="no sizing declared")


def memory_fit(memory_per_worker: int, shape: ClusterShape) -> int | None:
    """How many workers of ``memory_per_worker`` bytes the nodes hold, each node its own
    share (None: no bound). A worker that no node can hold would wait for ever: refused."""
    if not memory_per_worker or not shape.node_memory:
        return None
    fit = sum(int(memory // memory_per_worker) for memory in shape.node_memory)
    if fit < 1:
        raise ConfigError(f"a worker of this run needs {memory_per_worker / GiB:.2f} GiB (the models it loads and "
                          f"its working memory), and the largest node has {max(shape.node_memory) / GiB:.2f} GiB for "
                          "workers: give the job more memory (sbatch --mem) or use smaller models")
    return fit

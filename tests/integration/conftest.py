import time

import pytest
import ray

from curator_array.execution.clients import RayClient
from curator_array.execution.ray_cluster import NodeOptions, start_worker
from curator_array.stages.download import DOWNLOAD_SLOT

MiB = 2**20


@pytest.fixture(scope="module")
def ray_cluster(request):
    """One private Ray cluster per test module, of the module's ``NODE_CPUS`` logical CPUs (8
    by default, so that pool caps bind). Ray Data runs a task per free CPU, each new worker
    importing Ray Data (2.4 CPU-s): on 2 real cores, 8 workers cost a module 20 CPU-s."""
    cpus = getattr(request.module, "NODE_CPUS", 8)
    with RayClient(node_options=NodeOptions(num_cpus=cpus, object_store_memory=300 * 1024 * 1024)) as client:
        yield client


@pytest.fixture(scope="module")
def two_node_cluster(request):
    """Two raylets on this host, each offering two download slots (the hard per-node cap).

    Each node offers one logical CPU, or the module's ``NODE_CPUS``: the modules on it size
    their download pools by slots, and Ray starts a worker for each logical CPU, each
    importing Ray Data on the 2 real cores."""
    cpus = getattr(request.module, "NODE_CPUS", 1)
    options = NodeOptions(num_cpus=cpus, object_store_memory=150 * MiB, custom_resources={DOWNLOAD_SLOT: 2})
    with RayClient(node_options=options) as client:
        client.extra_nodes.append(start_worker(client.address, client.session_dir, client.token_path, options,
                                               log_name="ray-worker-2.log"))
        deadline = time.monotonic() + 60
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            assert time.monotonic() < deadline, client.extra_nodes[0].log_tail()
            time.sleep(0.5)
        yield client

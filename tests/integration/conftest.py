import pytest

from curator_array.clients import RayClient
from curator_array.ray_cluster import NodeOptions


@pytest.fixture(scope="module")
def ray_cluster():
    """One private Ray cluster per test module (8 logical CPUs, so pool caps bind)."""
    with RayClient(node_options=NodeOptions(num_cpus=8, object_store_memory=300 * 1024 * 1024)) as client:
        yield client

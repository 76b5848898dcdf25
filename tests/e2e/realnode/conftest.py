"""Real-node end to end: a control plane with one real kubelet node (containerd, runc) beside KWOK
nodes, a local registry inside the cluster's namespace, and every image of every release published there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.cluster import Cluster
from devcluster.processes import identify, survivors
from devcluster.publish import Published, publish
from devcluster.realnode import CGROUPS

from . import helm_install


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test here also starts the real-node cluster, publishes every image and starts OLM: each
    test here has 20 minutes."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.timeout(1200))


@pytest.fixture(scope="package")
def real_cluster() -> Iterator[Cluster]:
    with Cluster(real_node=True, audit_users=(helm_install.OPERATOR_USER,)) as running:
        assert running.node is not None
        processes, cgroup = identify(running.pids()), running.node.cgroup
        yield running
    assert not survivors(processes), "real-node cluster processes outlived it"
    assert not [h for h in CGROUPS.iterdir() if (h / cgroup).exists()], "the real node's cgroups outlived it"


@pytest.fixture(scope="package")
def published(real_cluster: Cluster) -> Published:
    assert real_cluster.registry is not None
    return publish(real_cluster.registry.host)

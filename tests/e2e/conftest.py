"""Fixtures for end-to-end tests: one real local control plane per test session, fresh nodes and
namespaces per test, and the CRD exactly as the bundle ships it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest
from devcluster.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "bundle" / "manifests" / "nodemaintenance.kubevirt.io_nodemaintenances.yaml"
CRD_NAME = "nodemaintenances.nodemaintenance.kubevirt.io"


def _suffix() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with Cluster() as running:
        pids = running.pids()
        yield running
    survivors = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert not survivors, f"control-plane processes still alive after teardown: {survivors}"


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{_suffix()}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def nodes(cluster: Cluster) -> Iterator[Callable[..., list[str]]]:
    created: list[str] = []

    def make(
        count: int = 1,
        *,
        labels: dict[str, str] | None = None,
        taints: list[dict] | None = None,
        unschedulable: bool = False,
    ) -> list[str]:
        names = [f"kwok-{_suffix()}" for _ in range(count)]
        for name in names:
            cluster.create_kwok_node(name, labels=labels, taints=taints, unschedulable=unschedulable)
            created.append(name)
        for name in names:
            cluster.wait_node_ready(name)
        return names

    yield make
    if created:
        cluster.kubectl("delete", "node", *created, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> str:
    cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    return CRD_NAME

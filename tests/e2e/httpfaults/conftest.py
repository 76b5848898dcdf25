"""Fixtures of the HTTP-level fault tests: the harness's fault proxy in front of the API server, and an
operator talking through it while the session's stands down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.cluster import Cluster
from devcluster.httpproxies import FaultProxy
from devcluster.operator import OperatorProcess

from ..helpers import standing_in


@pytest.fixture(scope="package")
def fault_proxy(cluster: Cluster) -> Iterator[FaultProxy]:
    with FaultProxy(cluster.server, cluster.ca_file) as proxy:
        yield proxy


@pytest.fixture(scope="package")
def faulted_operator(cluster: Cluster, operator: OperatorProcess, operator_kubeconfig: Path, fault_proxy: FaultProxy,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """The operator with every request going through ``fault_proxy`` (plain HTTP on loopback; the proxy
    speaks TLS to the API server and passes the operator's token on)."""
    workdir = tmp_path_factory.mktemp("httpfaults")
    kubeconfig = cluster.kubeconfig_via(operator_kubeconfig, workdir / "faulted.kubeconfig", fault_proxy.url)
    with standing_in(cluster, operator, kubeconfig, workdir / "operator", "under-http-faults") as process:
        yield process

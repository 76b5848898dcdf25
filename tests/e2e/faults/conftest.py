"""Fixtures of the fault tests: Toxiproxy in front of the API server, and the operator talking through it.

The session's operator is stopped while a fault test runs (two operators would share the work) and
started again afterwards; the operator under test takes its webhook port and certificate, so the
CRD's conversion keeps working.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import pytest
from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from devcluster.toxiproxy import Proxy, Toxiproxy, kubeconfig_through

from soak.chaos import Api, Supervisor, Tally


@pytest.fixture(scope="session")
def toxiproxy(cluster: Cluster) -> Iterator[Toxiproxy]:
    with Toxiproxy(cluster.logs_dir) as server:
        yield server


@pytest.fixture
def api_proxy(cluster: Cluster, toxiproxy: Toxiproxy) -> Proxy:
    """A fresh proxy to kube-apiserver, no toxics."""
    return toxiproxy.proxy(f"apiserver-{uuid.uuid4().hex[:6]}", urlsplit(cluster.server).netloc)


@pytest.fixture
def proxied_operator(cluster: Cluster, operator: OperatorProcess, operator_kubeconfig: Path, api_proxy: Proxy,
                     tmp_path: Path) -> Iterator[OperatorProcess]:
    """The operator with every request to the API server going through ``api_proxy``; the session's
    operator stands down meanwhile."""
    kubeconfig = kubeconfig_through(api_proxy, operator_kubeconfig, tmp_path / "proxied.kubeconfig")
    operator.stop()
    process = OperatorProcess(cluster, tmp_path / "operator", kubeconfig, identity="under-faults",
                              cert_dir=operator.cert_dir, webhook_port=operator.webhook_port)
    try:
        process.start()
        yield process
    finally:
        process.stop()
        print(f"operator under faults, last log lines:\n{process.logs()[-6000:]}")  # shown when the test failed
        operator.start()


@pytest.fixture
def admin(cluster: Cluster) -> Api:
    return Api(cluster)


@pytest.fixture
def tally() -> Tally:
    return Tally()


@pytest.fixture
def supervised(proxied_operator: OperatorProcess, tally: Tally) -> Iterator[Supervisor]:
    with Supervisor(proxied_operator, tally) as supervisor:
        yield supervisor


@pytest.fixture
def run_id(cluster: Cluster) -> Iterator[str]:
    """Names the test's nodes (label fault-run), which are deleted afterwards."""
    run = f"f{uuid.uuid4().hex[:5]}"
    yield run
    cluster.kubectl("delete", "nodes", "-l", f"fault-run={run}", "--wait=false", check=False)

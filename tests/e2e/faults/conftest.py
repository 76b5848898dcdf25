"""Fixtures of the fault tests: Toxiproxy in front of the API server, and the operator talking through it.

The session's operator stands down while a fault test runs (``helpers.standing_in``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from devcluster.toxiproxy import Proxy, Toxiproxy
from soak.chaos import Supervisor, Tally

from ..helpers import standing_in


@pytest.fixture(scope="package")
def api_proxy(cluster: Cluster, toxiproxy: Toxiproxy) -> Proxy:
    """The proxy to kube-apiserver the operator under test talks through."""
    return toxiproxy.proxy("apiserver", urlsplit(cluster.server).netloc)


@pytest.fixture(scope="package")
def proxied_operator(cluster: Cluster, operator: OperatorProcess, operator_kubeconfig: Path, api_proxy: Proxy,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """The operator with every request to the API server going through ``api_proxy``; the session's
    operator stands down meanwhile."""
    workdir = tmp_path_factory.mktemp("faults")
    kubeconfig = cluster.kubeconfig_via(operator_kubeconfig, workdir / "proxied.kubeconfig", f"https://{api_proxy.listen}")
    with standing_in(cluster, operator, kubeconfig, workdir / "operator", "under-faults") as process:
        yield process


@pytest.fixture(scope="package")
def supervisor(proxied_operator: OperatorProcess) -> Iterator[Supervisor]:
    with Supervisor(proxied_operator, Tally()) as running:
        yield running


@pytest.fixture
def supervised(supervisor: Supervisor, tally: Tally, api_proxy: Proxy, proxied_operator: OperatorProcess) -> Iterator[Supervisor]:
    """The operator under test kept running, what befalls it counted in this test's ``tally``; the proxy
    is left without faults afterwards."""
    supervisor.tally, supervisor.kills = tally, 0
    api_proxy.injected.clear()
    offset = len(proxied_operator.logs())
    yield supervisor
    for toxic in api_proxy.toxics():
        api_proxy.remove_toxic(toxic["name"])
    if not api_proxy.state()["enabled"]:
        api_proxy.set_enabled(True)
    print(f"operator under faults, its log during the test:\n{proxied_operator.logs()[offset:][-6000:]}")  # shown on failure

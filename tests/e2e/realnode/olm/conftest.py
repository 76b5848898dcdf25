"""OLM end to end, the way an admin's cluster runs it: the control plane with a real node, every image
published to its registry, OLM's operators, our catalog image, and one fresh install per test."""

from __future__ import annotations

import uuid
from collections.abc import Generator, Iterator

import pytest
from pluggy import Result

from devcluster.cluster import Cluster
from devcluster.olm import OLM
from devcluster.processes import identify, survivors
from devcluster.publish import Published

from ....releases import ALL_CRDS
from ...helpers import remove_crds
from .install import Install


@pytest.fixture(scope="package")
def cluster(real_cluster: Cluster) -> Cluster:
    """Overrides the session cluster for these tests: OLM runs pods (registry, unpack Jobs, our operator)."""
    return real_cluster


@pytest.fixture(scope="package")
def olm(cluster: Cluster, published: Published, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OLM]:
    running = OLM(cluster, tmp_path_factory.mktemp("olm"), published).start()
    yield running
    processes = identify(running.pids())
    running.stop()
    assert not survivors(processes), f"OLM processes still alive after teardown: {survivors(processes)}"


@pytest.fixture
def install(request: pytest.FixtureRequest, cluster: Cluster, olm: OLM, published: Published) -> Iterator[Install]:
    """A namespace to install into, and afterwards no trace: no operator, no CSV, no CRD, no NodeMaintenance.
    Each install starts with none of our CRDs, whatever an earlier test's operator did on its way out."""
    remove_crds(cluster, ALL_CRDS)
    namespace = f"nmo-{uuid.uuid4().hex[:6]}"
    installed = Install(cluster, namespace, published, olm)
    request.node.olm_logs = lambda: f"{olm.logs()}\n{installed.report()}"
    yield installed
    for kind in ("subscriptions", "clusterserviceversions", "installplans", "operatorgroups"):
        cluster.kubectl("delete", kind, "--all", "-n", namespace, "--wait=false", check=False)
    remove_crds(cluster, ALL_CRDS)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Result[pytest.TestReport], None]:
    """Attach OLM's own logs (and the operator's) to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    logs = getattr(item, "olm_logs", None)
    if report.failed and logs is not None:
        report.sections.append(("OLM and operator logs", logs()))

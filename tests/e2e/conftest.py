"""Fixtures for end-to-end tests: one real local control plane per test session, fresh nodes and
namespaces per test, and the CRD exactly as the bundle ships it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import USER as OPERATOR_USER
from devcluster.operator import OperatorProcess, csv_webhook, grant_csv_permissions, point_conversion_at
from devcluster.processes import identify, survivors
from devcluster.toxiproxy import Toxiproxy
from node_maintenance.api import CRD_NAME, VALIDATE_PATH, VALIDATE_POLICY_PATH
from node_maintenance.coordination import remediation
from node_maintenance_packaging.clusterserviceversion import NAMESPACE
from soak.chaos import Api, Tally

from .helpers import CRD_FILE, NAMESPACE_MANIFEST, NMP, PLUGIN_USER, apply, eventually, install_policy_crd, policy_status


def _suffix() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    # Every request of the operator is audited: tests/e2e/test_least_privilege.py checks them against the CSV;
    # so are kubectl nm's under an exec plugin (tests/e2e/test_plugin_kubeconfigs.py counts them).
    with Cluster(audit_users=(OPERATOR_USER, PLUGIN_USER)) as running:
        processes = identify(running.pids())
        yield running
    assert not survivors(processes), f"control-plane processes still alive after teardown: {survivors(processes)}"


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{_suffix()}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def run_id(cluster: Cluster) -> Iterator[str]:
    """Names a workload's nodes (label fault-run, ``soak.chaos.build_workload``), which are deleted afterwards,
    after the maintenances of them a test that failed half-way left: no later test finds those."""
    run = f"f{uuid.uuid4().hex[:5]}"
    yield run
    try:
        listed = cluster.kubectl("get", "nodemaintenances", "-o", "json", check=False)  # none to list: nothing left
        items = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
        left = [m["metadata"]["name"] for m in items if str(m["spec"].get("nodeName", "")).startswith(f"{run}-")]
        if left:  # within kubectl's own limit of 120 s
            cluster.kubectl("delete", "nodemaintenances", *left, "--timeout=90s", check=False)
    finally:
        cluster.kubectl("delete", "nodes", "-l", f"fault-run={run}", "--wait=false", check=False)


@pytest.fixture
def admin(cluster: Cluster) -> Api:
    return Api(cluster)


@pytest.fixture
def tally() -> Tally:
    return Tally()


@pytest.fixture(scope="session")
def toxiproxy(cluster: Cluster) -> Iterator[Toxiproxy]:
    """Toxiproxy, for links to the API server that tests fault."""
    with Toxiproxy(cluster.logs_dir) as server:
        yield server


@pytest.fixture(scope="session")
def etcd_guard_namespace(cluster: Cluster) -> str:
    """OpenShift's etcd guard namespace (its name, not ours), made once for the session's cluster and never
    deleted while it runs: every module this process runs on that cluster puts its guard budget here and
    deletes only that. A namespace deleted by one module would still be terminating for the next one."""
    name = "openshift-etcd"
    cluster.ensure_namespace(name)
    return name


@pytest.fixture
def lease_namespace(cluster: Cluster) -> str:
    """Where remediation Leases are held: absent in a fresh cluster (the operator also creates it)."""
    cluster.ensure_namespace(remediation.DEFAULT_LEASE_NAMESPACE)
    return remediation.DEFAULT_LEASE_NAMESPACE


@pytest.fixture
def nodes(cluster: Cluster) -> Iterator[Callable[..., list[str]]]:
    created: list[str] = []

    def make(
        count: int = 1,
        *,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, Any]] | None = None,
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
        cluster.kubectl("delete", "node", *created, "--wait=false", "--ignore-not-found")


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> str:
    cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    return CRD_NAME


@pytest.fixture(scope="session")
def operator_kubeconfig(cluster: Cluster, crd: str) -> Path:
    """A ServiceAccount bound to exactly the CSV's permissions (the operator never runs as cluster-admin), in its
    namespace as shipped, which enforces the `restricted` Pod Security Standard on the hook Jobs' pods too."""
    cluster.kubectl("apply", "-f", str(NAMESPACE_MANIFEST))
    return grant_csv_permissions(cluster, NAMESPACE)


@pytest.fixture(scope="session")
def operator(cluster: Cluster, operator_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """The operator as a local process, the CRD's conversion pointed at its webhook (as OLM would inject it)."""
    process = OperatorProcess(cluster, tmp_path_factory.mktemp("operator"), operator_kubeconfig)
    assert process.ca_pem is not None, "the operator serves a certificate of its own making"
    point_conversion_at(cluster, process.webhook_url + "/convert", process.ca_pem)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def operator_factory(cluster: Cluster, operator_kubeconfig: Path, tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    """More operator processes (other replicas), each with its own identity, ports and logs; ``server`` is where
    one reaches the API server instead of its own address (a proxy), ``options`` go to :class:`OperatorProcess`."""
    started: list[OperatorProcess] = []

    def make(identity: str, *, server: str | None = None, **options: Any) -> OperatorProcess:
        kubeconfig = operator_kubeconfig if server is None else cluster.kubeconfig_via(
            operator_kubeconfig, tmp_path / f"{identity}.kubeconfig", server)
        process = OperatorProcess(cluster, tmp_path / identity, kubeconfig, identity=identity, **options)
        started.append(process)
        return process

    yield make
    for process in started:
        process.stop()


@pytest.fixture
def admission_webhook(cluster: Cluster, operator: OperatorProcess) -> Iterator[str]:
    """The NodeMaintenance validating webhook registered by URL at the session operator, with the rules the CSV gives OLM;
    removed afterwards."""
    yield from _registered(cluster, operator, "node-maintenance-validation", VALIDATE_PATH)


@pytest.fixture(scope="module")
def policy_admission_webhook(cluster: Cluster, operator: OperatorProcess) -> Iterator[str]:
    """The NodeMaintenancePolicy validating webhook, registered the same way."""
    yield from _registered(cluster, operator, "node-maintenance-policy-validation", VALIDATE_POLICY_PATH)


def _registered(cluster: Cluster, operator: OperatorProcess, name: str, path: str) -> Iterator[str]:
    """A ValidatingWebhookConfiguration ``name`` for the CSV's webhook served at ``path``, pointing at the session
    operator by URL; deleted when the caller is done."""
    import base64
    import json

    assert operator.ca_pem is not None, "the operator serves a certificate of its own making"
    defined = csv_webhook(path)
    registered = ("rules", "failurePolicy", "sideEffects", "admissionReviewVersions", "timeoutSeconds", "matchPolicy")
    webhook: dict[str, Any] = {key: defined[key] for key in registered if key in defined}
    webhook["name"] = defined["generateName"]
    webhook["clientConfig"] = {"url": operator.webhook_url + path, "caBundle": base64.b64encode(operator.ca_pem).decode()}
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
              "webhooks": [webhook]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(config))
    yield name
    cluster.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found")


@pytest.fixture(scope="module")
def policy_crd(cluster: Cluster, operator: OperatorProcess) -> Iterator[str]:
    """The policy CRD, installed while the operator runs (as an upgrade installs it): the operator finds it by itself."""
    install_policy_crd(cluster)
    yield "nodemaintenancepolicies.nodemaintenance.kubevirt.io"
    cluster.kubectl("delete", NMP, "--all", "--wait=false", check=False)


@pytest.fixture
def policies(cluster: Cluster, policy_crd: str) -> Iterator[Callable[..., str]]:
    created: list[str] = []

    def make(selector: dict[str, str], **spec: Any) -> str:
        name = f"p-{uuid.uuid4().hex[:6]}"
        apply(cluster, {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenancePolicy", "metadata": {"name": name},
                        "spec": {"nodeSelector": {"matchLabels": selector}, **spec}})
        created.append(name)
        # In force once the operator has seen it: its status says so (the CRD may have been installed just now).
        eventually(lambda: policy_status(cluster, name).get("observedGeneration") == 1, f"policy {name} in force")
        return name

    yield make
    if created:
        cluster.kubectl("delete", NMP, *created, "--ignore-not-found", "--wait=false", check=False)

"""Installed with Helm, on a cluster where OLM does nothing: the chart pushed to the registry as an OCI chart (`helm
push`), installed from there (`helm install oci://…`) into a namespace that enforces the `restricted` Pod Security
Standard, with the operator issuing its own webhook certificate; a NodeMaintenance drains a node and gives it back;
`helm upgrade` keeps every NodeMaintenance and policy, and `helm uninstall` keeps the CRDs and their objects. With
cert-manager, its CRDs (from its pinned module: its controllers cannot be built here) accept the chart's Issuer and
Certificate, and its CA injector is pointed at that Certificate."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import toolchain
from devcluster.cluster import Cluster
from devcluster.publish import Published
from devcluster.realnode import NAME as REAL_NODE
from node_maintenance.api import CRD_NAME, GROUP, PLURAL
from node_maintenance_packaging.chart import DIRECTORY
from node_maintenance_packaging.chart_certificates import CERT_SECRET, SERVING_CERTIFICATE, WEBHOOK_CONFIGURATION

from ...releases import ALL_CRDS, CRDS, HEAD
from ..helpers import NM, NMP, apply, eventually, existing, get, remove_crds
from . import helm_install
from .bundle_install import restricted_namespace
from .kwok_drain import drain_a_kwok_node

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
RELEASE = "nmo"
KEPT_NODE = "kwok-helm-kept"  # its maintenance outlives an upgrade and an uninstall
CERT_MANAGER = "github.com/cert-manager/cert-manager"
# What a chart installs besides namespaced objects and the CRDs: an object of these names that Helm does not own yet
# makes `helm install` refuse, so what an earlier test left of them goes first.
CLUSTER_OBJECTS = (("validatingwebhookconfiguration", WEBHOOK_CONFIGURATION),
                   *(("clusterrole", name) for name in ("node-maintenance-operator", "node-maintenance-requester",
                                                         "node-maintenance-escalator", "node-maintenance-metrics-reader")),
                   ("clusterrolebinding", "node-maintenance-operator"))


def _helm(cluster: Cluster, *arguments: str | Path) -> str:
    result = subprocess.run([str(toolchain.binary("helm")), "--kubeconfig", str(cluster.kubeconfig), *map(str, arguments)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def chart(real_cluster: Cluster, published: Published, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The committed chart, packaged and pushed to the registry the images are in, as a release publishes it."""
    packaged = tmp_path_factory.mktemp("chart")
    _helm(real_cluster, "package", ROOT / DIRECTORY, "--destination", packaged)
    (archive,) = packaged.glob("*.tgz")
    _helm(real_cluster, "push", archive, f"oci://{published.registry}/charts", "--plain-http")
    return f"oci://{published.registry}/charts/{DIRECTORY.name}"


@pytest.fixture(scope="module")
def namespace(real_cluster: Cluster) -> Iterator[str]:
    """A namespace to install into, on a cluster where no other operator of ours runs and none of our CRDs is left."""
    for deployment in (get(real_cluster, "deployments", "-A", "-l", f"app.kubernetes.io/name={DIRECTORY.name}") or {}).get("items", []):
        real_cluster.kubectl("delete", "namespace", deployment["metadata"]["namespace"], "--timeout=120s")
    remove_crds(real_cluster, ALL_CRDS)
    for kind, name in CLUSTER_OBJECTS:
        real_cluster.kubectl("delete", kind, name, "--ignore-not-found")
    name = helm_install.NAMESPACE
    restricted_namespace(real_cluster, name)
    yield name
    _helm(real_cluster, "uninstall", RELEASE, "--namespace", name, "--ignore-not-found", "--wait")
    real_cluster.kubectl("delete", "namespace", name, "--wait=false")
    remove_crds(real_cluster, ALL_CRDS)
    real_cluster.kubectl("delete", "node", KEPT_NODE, "--ignore-not-found")


def _values(published: Published) -> list[str]:
    """The image by the digest the registry holds, as a release's chart names it."""
    release = published.inputs().releases.current
    repository = published.inputs().images.tagged("operator", release).rsplit(":", 1)[0]
    return ["--set", f"image.repository={repository}", "--set", f"image.digest={published.digest('operator', HEAD)}"]


def _ca_bundles(cluster: Cluster) -> set[str]:
    configuration = existing(cluster, "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION)
    bundles = {hook["clientConfig"].get("caBundle", "") for hook in configuration["webhooks"]}
    conversion = existing(cluster, "crd", CRD_NAME)["spec"]["conversion"]["webhook"]["clientConfig"]
    return bundles | {conversion.get("caBundle", "")}


def _operator_pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    listing = existing(cluster, "pods", "-n", namespace, "-l", f"app.kubernetes.io/name={DIRECTORY.name}")["items"]
    return [pod for pod in listing if not pod["metadata"].get("deletionTimestamp")]


def test_helm_installs_upgrades_and_uninstalls_without_olm(real_cluster: Cluster, published: Published, chart: str, namespace: str) -> None:
    install = ["--namespace", namespace, "--version", HEAD, "--plain-http", "--wait", "--timeout", "5m", *_values(published)]
    _helm(real_cluster, "install", RELEASE, chart, *install)
    pods = _operator_pods(real_cluster, namespace)
    assert len(pods) == 2 and {pod["spec"]["nodeName"] for pod in pods} == {REAL_NODE}
    assert {pod["status"]["containerStatuses"][0]["imageID"].rsplit("@", 1)[1] for pod in pods} == {published.digest("operator", HEAD)}

    # The operator issued its certificate: its CA is what the webhooks and the conversion trust.
    secret = existing(real_cluster, "secret", CERT_SECRET, "-n", namespace)
    assert {"ca.crt", "ca.key", "tls.crt", "tls.key"} <= set(secret["data"])
    eventually(lambda: _ca_bundles(real_cluster) == {secret["data"]["ca.crt"]}, "the operator's CA in every caBundle")
    assert base64.b64decode(secret["data"]["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")

    # The admission webhook answers over that TLS: it refuses what it should, with its own words.
    refused = real_cluster.kubectl("apply", "-f", "-", check=False, input=json.dumps(
        {"apiVersion": f"{GROUP}/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": "nm-nowhere"},
         "spec": {"nodeName": "no-such-node", "reason": "webhook test"}}))
    assert refused.returncode != 0 and "admission webhook" in refused.stderr and "denied" in refused.stderr, refused.stderr
    drain_a_kwok_node(real_cluster, "v1alpha1")  # served through the conversion webhook, then drained and given back
    # Nothing the operator asked was refused, and what the chart adds to the CSV's rules for its own certificate was
    # asked for: the Secret created and read, the webhook configuration read and patched, the CRD patched. The update
    # of the Secret comes with a renewal, weeks away (the unit tests renew).
    asked = [e for e in real_cluster.audit_events(helm_install.OPERATOR_USER, every_request=True) if e.get("objectRef")]
    assert not [f"{e['verb']} {e['requestURI']}" for e in asked if (e.get("responseStatus") or {}).get("code") == 403]
    certificate_requests = {(e["objectRef"]["resource"], e["verb"]) for e in asked}
    assert {("secrets", "create"), ("secrets", "get"), ("validatingwebhookconfigurations", "get"),
            ("validatingwebhookconfigurations", "patch"), ("customresourcedefinitions", "patch")} <= certificate_requests

    # Objects that must outlive an upgrade and an uninstall: a policy, and a maintenance of a node that is not there yet.
    apply(real_cluster, {"apiVersion": f"{GROUP}/v1beta1", "kind": "NodeMaintenancePolicy", "metadata": {"name": "helm-kept"},
                         "spec": {"nodeSelector": {"matchLabels": {"pool": "helm-kept"}}, "maxParallel": 1}})
    real_cluster.create_kwok_node(KEPT_NODE)
    real_cluster.wait_node_ready(KEPT_NODE)
    apply(real_cluster, {"apiVersion": f"{GROUP}/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": "nm-helm-kept"},
                         "spec": {"nodeName": KEPT_NODE, "reason": "kept through helm upgrade and uninstall"}})
    eventually(lambda: (get(real_cluster, NM, "nm-helm-kept") or {}).get("status", {}).get("phase") == "Succeeded", "nm-helm-kept Succeeded")
    kept = {kind: existing(real_cluster, kind, name)["metadata"]["uid"] for kind, name in ((NM, "nm-helm-kept"), (NMP, "helm-kept"))}
    issued = existing(real_cluster, "secret", CERT_SECRET, "-n", namespace)["metadata"]["resourceVersion"]

    # An upgrade (one replica now): the new pods serve the Secret's pair; nothing is issued again, nothing is lost.
    _helm(real_cluster, "upgrade", RELEASE, chart, *install, "--set", "replicas=1")
    eventually(lambda: len(_operator_pods(real_cluster, namespace)) == 1, "one replica after the upgrade")
    assert existing(real_cluster, "secret", CERT_SECRET, "-n", namespace)["metadata"]["resourceVersion"] == issued
    assert {kind: existing(real_cluster, kind, name)["metadata"]["uid"] for kind, name in ((NM, "nm-helm-kept"), (NMP, "helm-kept"))} == kept
    assert existing(real_cluster, f"{PLURAL}.v1alpha1.{GROUP}", "nm-helm-kept")["spec"]["nodeName"] == KEPT_NODE

    # An upgrade that restarts no pod (no pod re-injects at its start): the caBundles the operator wrote are still there.
    bundles = _ca_bundles(real_cluster)
    _helm(real_cluster, "upgrade", RELEASE, chart, *install, "--set", "replicas=1", "--set", "networkPolicy.enabled=false")
    assert _ca_bundles(real_cluster) == bundles

    # Uninstalled: the operator and its webhooks go; the CRDs, the maintenance, its node's cordon and the policy stay.
    _helm(real_cluster, "uninstall", RELEASE, "--namespace", namespace, "--wait")
    assert not _operator_pods(real_cluster, namespace)
    assert get(real_cluster, "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION) is None
    assert all(get(real_cluster, "crd", crd) is not None for crd in CRDS[HEAD])
    assert {kind: existing(real_cluster, kind, name)["metadata"]["uid"] for kind, name in ((NM, "nm-helm-kept"), (NMP, "helm-kept"))} == kept
    assert existing(real_cluster, "node", KEPT_NODE)["spec"].get("unschedulable") is True


def test_cert_manager_accepts_the_charts_issuer_and_certificate(real_cluster: Cluster, namespace: str) -> None:
    crds = toolchain.module_source("cert-manager", CERT_MANAGER) / "deploy" / "crds"
    for name in ("cert-manager.io_issuers.yaml", "cert-manager.io_clusterissuers.yaml", "cert-manager.io_certificates.yaml"):
        real_cluster.kubectl("apply", "--server-side", "-f", str(crds / name))
    real_cluster.kubectl("wait", "--for=condition=Established", "crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io", "--timeout=60s")
    for issuer in ([], ["--set", "certManager.issuerRef.name=corporate", "--set", "certManager.issuerRef.kind=ClusterIssuer"]):
        rendered = _helm(real_cluster, "template", RELEASE, ROOT / DIRECTORY, "--namespace", namespace, "--kube-version",
                         toolchain.KUBERNETES_VERSION, "--set", "certManager.enabled=true", *issuer)
        objects = [o for o in yaml.safe_load_all(rendered) if o and o["apiVersion"].startswith("cert-manager.io/")]
        assert {o["kind"] for o in objects} == ({"Certificate"} if issuer else {"Certificate", "Issuer"})
        accepted = real_cluster.kubectl("apply", "--dry-run=server", "-f", "-", check=False,
                                        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        assert accepted.returncode == 0, accepted.stderr
        serving = next(o for o in objects if o["kind"] == "Certificate" and o["metadata"]["name"] == SERVING_CERTIFICATE)
        assert serving["spec"]["secretName"] == CERT_SECRET and serving["metadata"]["namespace"] == namespace

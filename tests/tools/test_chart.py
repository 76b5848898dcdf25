"""The Helm chart is the bundle's operator, as Helm itself renders it: `helm lint` passes, and `helm template` gives the
CSV's RBAC, Deployment and webhooks, wired to the release's namespace, with the operator's own certificates by default
and cert-manager's when the admin turns them on. Helm is built from its pinned module, like the other tools."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import toolchain
from node_maintenance.api import CRD_NAME
from node_maintenance.coordination import remediation
from node_maintenance_packaging.chart import DIRECTORY
from node_maintenance_packaging.chart_certificates import CERT_DIR, CERT_SECRET, SERVING_CERTIFICATE, WEBHOOK_CONFIGURATION, WEBHOOK_SERVICE
from node_maintenance_packaging.clusterserviceversion import CSV_FILE
from node_maintenance_packaging.monitoring import PROMETHEUS_RULE_FILE

pytestmark = pytest.mark.tools

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / DIRECTORY
NAMESPACE = "maintenance"
KUBE_VERSION = "1.34.0"
CERT_ARGS = ["--manage-certs", f"--cert-secret={CERT_SECRET}", f"--webhook-service={WEBHOOK_SERVICE}",
             f"--webhook-configuration={WEBHOOK_CONFIGURATION}"]


def _helm(*arguments: str | Path) -> str:
    result = subprocess.run([str(toolchain.binary("helm")), *map(str, arguments)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _render(*values: str) -> list[dict[str, Any]]:
    settings = [argument for value in values for argument in ("--set", value)]
    text = _helm("template", "nmo", CHART, "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION, *settings)
    return [document for document in yaml.safe_load_all(text) if document]


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    return found


def _csv() -> dict[str, Any]:
    csv: dict[str, Any] = yaml.safe_load((ROOT / "bundle" / "manifests" / CSV_FILE).read_text())
    return csv


@pytest.mark.parametrize("values", [(), ("certManager.enabled=true", "serviceMonitor.enabled=true", "prometheusRule.enabled=true",
                                     "dashboard.enabled=true", "networkPolicy.enabled=false", "image.digest=sha256:" + "0" * 64)])
def test_helm_lint_passes(values: tuple[str, ...]) -> None:
    assert "0 chart(s) failed" in _helm("lint", CHART, "--strict", *(argument for value in values for argument in ("--set", value)))


def test_the_rbac_is_the_csvs_plus_what_the_operators_own_certificates_need() -> None:
    objects = _render()
    install = _csv()["spec"]["install"]["spec"]
    cluster_rules = _one(objects, "ClusterRole", "node-maintenance-operator")["rules"]
    local_rules = _one(objects, "Role")["rules"]
    (csv_cluster,), (csv_local,) = install["clusterPermissions"], install["permissions"]
    assert cluster_rules[:len(csv_cluster["rules"])] == csv_cluster["rules"]
    assert local_rules[:len(csv_local["rules"])] == csv_local["rules"]
    extra = cluster_rules[len(csv_cluster["rules"]):] + local_rules[len(csv_local["rules"]):]
    assert extra == [
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
         "resourceNames": [WEBHOOK_CONFIGURATION], "verbs": ["get", "patch"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": [CRD_NAME], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [CERT_SECRET], "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]
    account = _one(objects, "ServiceAccount")["metadata"]
    assert account["name"] == csv_cluster["serviceAccountName"] and account["namespace"] == NAMESPACE
    for binding in (_one(objects, "ClusterRoleBinding"), _one(objects, "RoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"], "namespace": NAMESPACE}]
    # No wildcard anywhere: every rule names its groups, resources (or URLs) and verbs.
    rules = [rule for o in objects if o["kind"] in ("ClusterRole", "Role") for rule in o["rules"]]
    assert not [rule for rule in rules for key in ("apiGroups", "resources", "nonResourceURLs", "verbs") if "*" in rule.get(key, ())]


def test_the_deployment_is_the_csvs_with_the_values_an_admin_sets() -> None:
    (csv_deployment,) = _csv()["spec"]["install"]["spec"]["deployments"]
    (csv_container,) = csv_deployment["spec"]["template"]["spec"]["containers"]
    deployment = _one(_render(), "Deployment")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [*csv_container["args"], *CERT_ARGS]
    assert container["image"] == csv_container["image"]  # the committed chart names the image as the committed CSV does
    assert container["securityContext"] == csv_container["securityContext"] and container["resources"] == csv_container["resources"]
    for key in ("priorityClassName", "tolerations", "affinity", "securityContext", "serviceAccountName"):
        assert deployment["spec"]["template"]["spec"][key] == csv_deployment["spec"]["template"]["spec"][key], key
    assert deployment["spec"]["replicas"] == csv_deployment["spec"]["replicas"]

    digest = "sha256:" + "a" * 64
    changed = _one(_render(f"image.digest={digest}", "replicas=3", "nodeSelector.pool=infra", "remediationLeaseNamespace=",
                           "resources.limits.memory=512Mi"), "Deployment")
    (container,) = changed["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{csv_container['image'].rsplit(':', 1)[0]}@{digest}"
    assert changed["spec"]["replicas"] == 3 and changed["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "infra"}
    assert container["resources"]["limits"]["memory"] == "512Mi"
    assert {"name": remediation.LEASE_NAMESPACE_ENV, "value": ""} in container["env"]


def test_the_webhooks_and_the_conversion_call_the_service_in_the_release_namespace() -> None:
    objects = _render()
    csv_hooks = [h for h in _csv()["spec"]["webhookdefinitions"] if h["type"] == "ValidatingAdmissionWebhook"]
    configuration = _one(objects, "ValidatingWebhookConfiguration")
    assert [(w["name"], w["clientConfig"]["service"]["path"], w["rules"], w["failurePolicy"]) for w in configuration["webhooks"]] == [
        (h["generateName"], h["webhookPath"], h["rules"], h["failurePolicy"]) for h in csv_hooks]
    service = {"namespace": NAMESPACE, "name": WEBHOOK_SERVICE, "port": 443}
    assert all({k: w["clientConfig"]["service"][k] for k in service} == service for w in configuration["webhooks"])
    assert not (configuration["metadata"].get("annotations") or {})  # the operator writes the CA itself
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    assert all(crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for crd in crds)
    conversion = _one(objects, "CustomResourceDefinition", CRD_NAME)["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook" and conversion["webhook"]["clientConfig"]["service"] == {**service, "path": "/convert"}
    assert _one(objects, "Service", WEBHOOK_SERVICE)["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": 9443, "protocol": "TCP"}]
    assert not [o for o in objects if o["kind"] in ("Certificate", "Issuer")]


def test_with_cert_manager_a_certificate_is_mounted_and_its_ca_injected() -> None:
    objects = _render("certManager.enabled=true")
    deployment = _one(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert not set(CERT_ARGS) & set(container["args"])
    assert {"name": "serving-cert", "mountPath": CERT_DIR, "readOnly": True} in container["volumeMounts"]
    assert {"name": "serving-cert", "secret": {"secretName": CERT_SECRET}} in deployment["spec"]["template"]["spec"]["volumes"]
    serving = _one(objects, "Certificate", SERVING_CERTIFICATE)
    assert serving["spec"]["secretName"] == CERT_SECRET
    assert serving["spec"]["dnsNames"] == [f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc", f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc.cluster.local"]
    ca_issuer = serving["spec"]["issuerRef"]["name"]
    assert _one(objects, "Issuer", ca_issuer)["spec"]["ca"]["secretName"] == _one(objects, "Certificate", ca_issuer)["spec"]["secretName"]
    injected = f"{NAMESPACE}/{SERVING_CERTIFICATE}"
    assert _one(objects, "ValidatingWebhookConfiguration")["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == injected
    assert _one(objects, "CustomResourceDefinition", CRD_NAME)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == injected
    assert _one(objects, "ClusterRole", "node-maintenance-operator")["rules"] == _csv()["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"]

    own = _render("certManager.enabled=true", "certManager.issuerRef.name=corporate", "certManager.issuerRef.kind=ClusterIssuer")
    assert _one(own, "Certificate")["spec"]["issuerRef"] == {"name": "corporate", "kind": "ClusterIssuer"}
    assert not [o for o in own if o["kind"] == "Issuer"]


def test_monitoring_is_shipped_when_turned_on_as_in_monitoring() -> None:
    assert not [o for o in _render() if o["kind"] in ("ServiceMonitor", "PrometheusRule", "ConfigMap")]
    objects = _render("serviceMonitor.enabled=true", "prometheusRule.enabled=true", "dashboard.enabled=true")
    shipped = yaml.safe_load((ROOT / PROMETHEUS_RULE_FILE).read_text())
    rule = _one(objects, "PrometheusRule")
    assert rule["spec"] == shipped["spec"] and rule["metadata"]["namespace"] == NAMESPACE  # {{ $labels.node }} survives Helm
    assert _one(objects, "ServiceMonitor")["metadata"]["namespace"] == NAMESPACE
    dashboard = _one(objects, "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["data"]["grafana-dashboard.json"] == (ROOT / "monitoring" / "grafana-dashboard.json").read_text()

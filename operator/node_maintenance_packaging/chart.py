"""The Helm chart of the current release, for clusters without OLM: made from the same objects as the bundle.

Its RBAC is the CSV's permissions, its Deployment the CSV's, its webhooks the CSV's webhook definitions wired as OLM
wires them (a Service named after the Deployment, the conversion of the CRDs that ask for it), and beside them the
bundle's other objects (the CRDs, the metrics Service, the budget, the NetworkPolicy, the ClusterRoles an admin binds)
and the monitoring files. What OLM does at install, the chart leaves to one of two: cert-manager, when the admin says it
runs (an Issuer and a Certificate; its CA injector writes the caBundles), or by default the operator itself
(``--manage-certs``: it keeps its CA and serving pair in a Secret, writes its CA into the caBundles, renews both).

The CRDs are templates, not ``crds/``, so that an upgrade brings a new release's schemas; ``helm.sh/resource-policy: keep``
leaves them, and every NodeMaintenance and policy, in place when the release is uninstalled.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import PurePosixPath
from typing import Any

from node_maintenance.coordination import remediation

from . import helmtext, yamlout
from .bundle import bundle_manifests
from .chart_certificates import (
    CERT_SECRET,
    WEBHOOK_CONFIGURATION,
    WEBHOOK_SERVICE,
    WITH_CERT_MANAGER,
    certificate_rules,
    certificates,
    inject_ca,
    mount,
    operator_args,
    volume,
    without_cert_manager,
)
from .chart_objects import END, NAMESPACE, conditional, framed, labels, metadata
from .clusterserviceversion import CSV_FILE, DEPLOYMENT
from .files import Output, RenderedFile
from .helmtext import Block, Expr
from .imagerefs import ImageRefs
from .monitoring import DASHBOARD_FILE, monitoring_objects
from .releases import Release, Releases
from .templating import Templates

DIRECTORY = PurePosixPath("charts") / DEPLOYMENT
SERVICE_PORT = 443
COMMENT_WIDTH = 110


def render_chart(templates: Templates, releases: Releases, images: ImageRefs) -> Output:
    """``charts/node-maintenance-operator/``: Chart.yaml, values.yaml and the templates."""
    release = releases.current
    manifests = bundle_manifests(templates, releases, images, release)
    csv = manifests[CSV_FILE]
    install = csv["spec"]["install"]["spec"]
    (deployment,) = install["deployments"]
    webhooks = csv["spec"].get("webhookdefinitions") or []
    others = [obj for name, obj in manifests.items() if name != CSV_FILE]
    crds = [obj for obj in others if obj["kind"] == "CustomResourceDefinition"]
    bundled = [obj for obj in others if obj["kind"] != "CustomResourceDefinition"]
    converted = {name for hook in webhooks if hook["type"] == "ConversionWebhook" for name in hook["conversionCRDs"]}
    common = labels(release)
    pod = deployment["spec"]["template"]["spec"]
    files = {
        "Chart.yaml": yamlout.dump(_chart(releases, release, csv)),
        "values.yaml": _values(images, release, pod),
        "templates/crds.yaml": helmtext.template(*(_crd(crd, crd["metadata"]["name"] in converted, common) for crd in crds)),
        "templates/rbac.yaml": helmtext.template(*_rbac(install, common, sorted(converted))),
        "templates/deployment.yaml": helmtext.template(_deployment(deployment, common)),
        "templates/webhooks.yaml": helmtext.template(_webhook_service(webhooks, common), *_webhook_configuration(webhooks, common)),
        "templates/bundled.yaml": helmtext.template(*(_bundled(obj, common) for obj in bundled)),
        "templates/certificates.yaml": conditional(WITH_CERT_MANAGER, helmtext.template(*certificates(common))),
        **_monitoring(templates, releases, common),
    }
    return Output(tuple(RenderedFile.text(str(DIRECTORY / name), text) for name, text in files.items()), owned_dirs=(DIRECTORY,))


def _chart(releases: Releases, release: Release, csv: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v2",
        "name": DEPLOYMENT,
        "description": csv["metadata"]["annotations"]["description"],
        "type": "application",
        "version": release.version,
        "appVersion": release.version,
        # A pre-release suffix, so that the managed clusters' versions (v1.31.2-eks-…) match too.
        "kubeVersion": f">= {releases.min_kube_version}-0",
        "keywords": csv["spec"]["keywords"],
    }


def _values(images: ImageRefs, release: Release, pod: dict[str, Any]) -> str:
    """values.yaml, each value with what it does; the defaults are the CSV's."""
    tagged = images.tagged("operator", release)
    (container,) = pod["containers"]
    sections: list[tuple[str, dict[str, Any]]] = [
        ("The operator's image: named by its digest when one is given (a release's chart gives it), else by its tag.",
         {"image": {"repository": tagged.rsplit(":", 1)[0], "tag": tagged.rsplit(":", 1)[1],
                    "digest": images.digests.get(tagged, ""), "pullPolicy": "IfNotPresent"}}),
        ("Two replicas: one keeps the webhooks served and takes the lead while the other's node is drained.",
         {"replicas": 2}),
        ("", {"resources": container["resources"]}),
        ("The operator drains nodes, its own among them: it runs before ordinary workloads, on any node.",
         {"priorityClassName": pod["priorityClassName"], "tolerations": pod["tolerations"], "nodeSelector": {},
          "affinity": pod["affinity"]}),
        ("Where the per-node Leases shared with remediation (medik8s) are held; empty turns the coordination off.",
         {"remediationLeaseNamespace": remediation.DEFAULT_LEASE_NAMESPACE}),
        (("The webhooks' serving certificate. By default the operator issues it, keeps it in the Secret "
          f"{CERT_SECRET}, writes its CA into the webhooks and the CRD's conversion, and renews it. With cert-manager "
          "running, enable this: a Certificate from issuerRef (an Issuer or ClusterIssuer of yours: name, kind, "
          "group), or from a self-signed CA the chart makes when issuerRef is empty; cert-manager's CA injector writes "
          "the caBundles."),
         {"certManager": {"enabled": False, "issuerRef": {}}}),
        (("A NetworkPolicy: the webhooks' port open to any source (the API server calls it from wherever it runs), "
          "/metrics only to namespaces labelled metrics=enabled (or OpenShift's monitoring), nothing else."),
         {"networkPolicy": {"enabled": True}}),
        (("With the Prometheus Operator: a ServiceMonitor of /metrics (over HTTPS; bind the ClusterRole "
          "node-maintenance-metrics-reader to Prometheus), the alerts docs/metrics.md describes, and a Grafana dashboard "
          "as a ConfigMap labelled grafana_dashboard for Grafana's sidecar."),
         {"serviceMonitor": {"enabled": False}, "prometheusRule": {"enabled": False}, "dashboard": {"enabled": False}}),
    ]
    return "\n".join((textwrap.fill(comment, COMMENT_WIDTH, initial_indent="# ", subsequent_indent="# ") + "\n" if comment else "")
                     + yamlout.dump(values) for comment, values in sections)


def _crd(crd: dict[str, Any], converted: bool, common: dict[str, Any]) -> dict[str, Any]:
    keep = dict(crd)
    keep["metadata"] = {**crd["metadata"], "annotations": {**(crd["metadata"].get("annotations") or {}), "helm.sh/resource-policy": "keep"}}
    spec = dict(crd["spec"])
    if converted:
        service = {"namespace": NAMESPACE, "name": WEBHOOK_SERVICE, "path": "/convert", "port": SERVICE_PORT}
        spec["conversion"] = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"service": service}}}
    return {**keep, "metadata": metadata(keep, common, namespaced=False, extra=(inject_ca(),) if converted else ()), "spec": spec}


def _rbac(install: dict[str, Any], common: dict[str, Any], converted: list[str]) -> list[dict[str, Any]]:
    """The ServiceAccount, bound to exactly the CSV's rules (OLM makes the same objects from them), plus what the
    operator's own certificates need when cert-manager does not issue them."""
    (cluster,) = install["clusterPermissions"]
    (local,) = install["permissions"]
    account = cluster["serviceAccountName"]
    cert_cluster, cert_local = certificate_rules(converted)
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata({"metadata": {"name": account}}, common)},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": metadata({"metadata": {"name": DEPLOYMENT}}, common, namespaced=False),
         "rules": [*cluster["rules"], without_cert_manager(cert_cluster)]},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": metadata({"metadata": {"name": DEPLOYMENT}}, common, namespaced=False),
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": DEPLOYMENT}, "subjects": subject},
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": metadata({"metadata": {"name": DEPLOYMENT}}, common),
         "rules": [*local["rules"], without_cert_manager(cert_local)]},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": metadata({"metadata": {"name": DEPLOYMENT}}, common),
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": DEPLOYMENT}, "subjects": subject},
    ]


def _deployment(deployment: dict[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    """The CSV's Deployment, with the admin's values where the chart offers them."""
    spec = dict(deployment["spec"])
    template = dict(spec["template"])
    pod = dict(template["spec"])
    (container,) = pod["containers"]
    container = dict(container)
    container["image"] = Expr("{{ .Values.image.repository }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}"
                              "{{ else }}:{{ .Values.image.tag }}{{ end }}")
    container["imagePullPolicy"] = Expr("{{ .Values.image.pullPolicy }}")
    container["args"] = [*container["args"], operator_args()]
    container["env"] = [{**variable, "value": Expr("{{ .Values.remediationLeaseNamespace | quote }}")}
                        if variable["name"] == remediation.LEASE_NAMESPACE_ENV else variable for variable in container["env"]]
    container["resources"] = Block(".Values.resources")
    container["volumeMounts"] = [*container["volumeMounts"], mount()]
    pod.update(containers=[container], priorityClassName=Expr("{{ .Values.priorityClassName | quote }}"),
               tolerations=Block(".Values.tolerations"), nodeSelector=Block(".Values.nodeSelector"), affinity=Block(".Values.affinity"),
               volumes=[*pod["volumes"], volume()])
    template["spec"] = pod
    spec.update(replicas=Expr("{{ .Values.replicas }}"), template=template)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": metadata({"metadata": {"name": deployment["name"]}}, common), "spec": spec}


def _webhook_service(webhooks: list[dict[str, Any]], common: dict[str, Any]) -> dict[str, Any]:
    """The Service the API server calls the webhooks through, on 443 as OLM makes it."""
    (port,) = {hook["targetPort"] for hook in webhooks}
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata({"metadata": {"name": WEBHOOK_SERVICE}}, common),
            "spec": {"selector": {"app.kubernetes.io/name": DEPLOYMENT},
                     "ports": [{"name": "webhook", "port": SERVICE_PORT, "targetPort": port, "protocol": "TCP"}]}}


def _webhook_configuration(webhooks: list[dict[str, Any]], common: dict[str, Any]) -> list[dict[str, Any]]:
    """The CSV's admission webhooks in one ValidatingWebhookConfiguration, as OLM configures them."""
    validating = [hook for hook in webhooks if hook["type"] == "ValidatingAdmissionWebhook"]
    if not validating:
        return []
    copied = ("admissionReviewVersions", "sideEffects", "failurePolicy", "timeoutSeconds", "matchPolicy", "rules", "objectSelector")
    entries = [{"name": hook["generateName"],
                "clientConfig": {"service": {"namespace": NAMESPACE, "name": WEBHOOK_SERVICE, "path": hook["webhookPath"], "port": SERVICE_PORT}},
                **{key: hook[key] for key in copied if key in hook}} for hook in validating]
    named = metadata({"metadata": {"name": WEBHOOK_CONFIGURATION}}, common, namespaced=False, extra=(inject_ca(),))
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": named,
             "webhooks": entries}]


def _bundled(obj: dict[str, Any], common: dict[str, Any]) -> dict[Any, Any]:
    """One of the bundle's other objects, in the release's namespace when it has one."""
    namespaced = obj["kind"] not in ("ClusterRole",)
    document = {**obj, "metadata": metadata(obj, common, namespaced=namespaced)}
    if obj["kind"] == "NetworkPolicy":
        return framed("{{- if .Values.networkPolicy.enabled }}", document, END)
    return document


def _monitoring(templates: Templates, releases: Releases, common: dict[str, Any]) -> dict[str, str]:
    """The ServiceMonitor, the alerts and the dashboard of ``monitoring/``, each when its value turns it on."""
    monitor, rule, dashboard = monitoring_objects(templates, releases)
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{DEPLOYMENT}-dashboard", "labels": {"grafana_dashboard": "1"}},
                  "data": {DASHBOARD_FILE.name: json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"}}
    return {
        f"templates/{name}.yaml": conditional(f"{{{{- if .Values.{value}.enabled }}}}",
                                                helmtext.template({**obj, "metadata": metadata(obj, common)}))
        for name, value, obj in (("servicemonitor", "serviceMonitor", monitor), ("prometheusrule", "prometheusRule", rule),
                                 ("dashboard", "dashboard", config_map))
    }


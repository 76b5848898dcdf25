"""Install one release from its rendered bundle the way OLM wires a CSV: the CRD, the ServiceAccount
bound to exactly the CSV's rules, the CSV's own Deployment and the bundle's PodDisruptionBudget, and for
webhooks a Service, a serving certificate mounted where OLM mounts it, and the CRD's conversion pointed at
the Service."""

from __future__ import annotations

import base64
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from devcluster.cluster import Cluster
from devcluster.operator import grant_csv_permissions
from devcluster.pki import generate_self_signed
from devcluster.waiting import polls
from node_maintenance.api import CRD_NAME
from node_maintenance_packaging.render import Inputs, bundle_output

# Where OLM mounts a webhook's serving certificate in the operator's containers.
WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
# The releases before the startup probe: their liveness probe restarts a process silent for 75 s (15 s, then three
# periods of 20 s); two minutes leave room for a start slowed by a busy node, and the test asserts no restart besides.
READY_WITHOUT_STARTUP_PROBE = 120.0


@dataclass(frozen=True)
class Installed:
    namespace: str
    deployment: str
    csv: dict[str, Any]


def bundle_objects(inputs: Inputs, version: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The CSV and the other objects of one release's bundle, as rendered for the published images."""
    docs = [yaml.safe_load(f.content) for f in bundle_output(inputs, version).files if f.path.parts[:2] == ("bundle", "manifests")]
    return next(d for d in docs if d["kind"] == "ClusterServiceVersion"), [d for d in docs if d["kind"] != "ClusterServiceVersion"]


def restricted_namespace(cluster: Cluster, name: str) -> None:
    """A namespace that enforces the `restricted` Pod Security Standard."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "restricted",
                                              "pod-security.kubernetes.io/enforce-version": "latest"}},
    }))


def install(cluster: Cluster, inputs: Inputs, version: str, namespace: str) -> Installed:
    csv, objects = bundle_objects(inputs, version)
    for crd in (o for o in objects if o["kind"] == "CustomResourceDefinition"):
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(crd))
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
    restricted_namespace(cluster, namespace)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as csv_file:
        csv_file.write(yaml.safe_dump(csv))
        csv_file.flush()
        grant_csv_permissions(cluster, namespace, Path(csv_file.name))
    spec = csv["spec"]["install"]["spec"]["deployments"][0]
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": spec["name"], "namespace": namespace}, "spec": spec["spec"]}
    webhooks = csv["spec"].get("webhookdefinitions") or []
    if webhooks:
        _serve_webhooks(cluster, namespace, spec["name"], deployment, webhooks)
    for budget in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(budget))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(deployment))
    return Installed(namespace, spec["name"], csv)


def _serve_webhooks(cluster: Cluster, namespace: str, name: str, deployment: dict[str, Any], webhooks: list[dict[str, Any]]) -> None:
    service = f"{name}-service"
    with tempfile.TemporaryDirectory() as directory:
        ca = generate_self_signed(Path(directory), [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"], days=1)
        cert, key = (Path(directory) / "tls.crt").read_text(), (Path(directory) / "tls.key").read_text()
    port = webhooks[0]["containerPort"]
    objects = [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{service}-cert", "namespace": namespace},
         "type": "kubernetes.io/tls", "stringData": {"tls.crt": cert, "tls.key": key}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "namespace": namespace},
         "spec": {"selector": deployment["spec"]["selector"]["matchLabels"],
                  "ports": [{"name": "webhook", "port": 443, "targetPort": port}]}},
    ]
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    pod = deployment["spec"]["template"]["spec"]
    pod.setdefault("volumes", []).append({"name": "webhook-cert", "secret": {"secretName": f"{service}-cert"}})
    pod["containers"][0].setdefault("volumeMounts", []).append({"name": "webhook-cert", "mountPath": WEBHOOK_CERT_DIR, "readOnly": True})
    conversion = next((w for w in webhooks if w["type"] == "ConversionWebhook"), None)
    if conversion:
        patch = {"spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": namespace, "name": service, "path": conversion["webhookPath"], "port": 443},
                             "caBundle": base64.b64encode(ca).decode()}}}}}
        cluster.kubectl("patch", "crd", CRD_NAME, "--type=merge", "-p", json.dumps(patch))


def wait_ready(cluster: Cluster, installed: Installed, pull_timeout: float = 600) -> dict[str, Any]:
    """Wait until the Deployment has rolled out and its pod of the current template is Ready; return that pod.

    The wait counts from the moment the pod's container started, which is what the operator answers for, and lasts
    as long as the CSV lets the kubelet wait for the operator's first answer (`start_allowance`). Pulling its image
    before is the node's work, bounded apart by ``pull_timeout`` (on a loaded machine a pull from the local registry
    took a minute and a half, and a single deadline over both failed a release whose start was on time)."""
    spec = installed.csv["spec"]["install"]["spec"]["deployments"][0]["spec"]
    container = spec["template"]["spec"]["containers"][0]
    image, timeout = container["image"], start_allowance(container)
    selector = ",".join(f"{k}={v}" for k, v in spec["selector"]["matchLabels"].items())
    started: float | None = None
    for _ in polls(pull_timeout + timeout):
        pods = json.loads(cluster.kubectl("get", "pods", "-n", installed.namespace, "-l", selector, "-o", "json").stdout)["items"]
        current = [p for p in pods if p["spec"]["containers"][0]["image"] == image and not p["metadata"].get("deletionTimestamp")]
        ready = [p for p in current if any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))]
        if ready and len(pods) == len(current):  # the previous release's pod is gone
            return cast(dict[str, Any], ready[0])
        if started is None and any(_started(p) for p in current):
            started = time.monotonic()
        if started is not None and time.monotonic() > started + timeout:
            break
    events = cluster.kubectl("get", "events", "-n", installed.namespace, check=False).stdout
    logs = cluster.kubectl("logs", "-n", installed.namespace, f"deployment/{installed.deployment}", "--tail=40", check=False).stdout
    when = "its container's start" if started is not None else f"its image's pull (no container started in {pull_timeout + timeout:.0f}s)"
    raise AssertionError(f"operator pod not Ready within {timeout:.0f}s of {when}\nevents:\n{events}\nlogs:\n{logs}")


def start_allowance(container: dict[str, Any]) -> float:
    """Seconds from a container's start to its first Ready that its probes allow. With a startup probe, the kubelet waits
    ``periodSeconds × failureThreshold`` for a first answer (the CSV gives a replica that starts on a busy node five
    minutes; at a load average near 30 a start took over two), then one readiness period. A release without one is given
    ``READY_WITHOUT_STARTUP_PROBE``."""
    startup = container.get("startupProbe")
    if startup is None:
        return READY_WITHOUT_STARTUP_PROBE
    readiness = container.get("readinessProbe") or {}
    return float(startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3) + readiness.get("periodSeconds", 10))


def _started(pod: dict[str, Any]) -> bool:
    """Whether the pod's container has started (its image pulled): running now, or run before and restarted."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any("running" in (c.get("state") or {}) or "terminated" in (c.get("lastState") or {}) for c in statuses)

"""Our images, run the way a cluster runs them: each release's operator image as the pod its CSV
describes, on the real node, in a namespace that enforces the `restricted` Pod Security Standard."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, cast

import pytest

from devcluster.cluster import KWOK_TAINT, Cluster
from devcluster.publish import Published
from devcluster.realnode import NAME as REAL_NODE
from node_maintenance.api import GROUP, PLURAL, VERSIONS

from ...releases import HEAD, RELEASES
from ..helpers import eventually
from .bundle_install import install, restricted_namespace, wait_ready
from .kwok_drain import drain_a_kwok_node

pytestmark = pytest.mark.e2e

NON_ROOT_UID = "65532"  # the image's USER
TIMINGS: dict[str, float] = {}


def _json(cluster: Cluster, *args: str) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(cluster.kubectl(*args, "-o", "json").stdout))


def test_real_node_runs_our_image_and_its_pods_reach_the_api_by_name(real_cluster: Cluster, published: Published) -> None:
    node = _json(real_cluster, "get", "node", REAL_NODE)
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert not any(t["key"] == KWOK_TAINT["key"] for t in node["spec"].get("taints") or [])
    namespace = f"probe-{uuid.uuid4().hex[:6]}"
    restricted_namespace(real_cluster, namespace)
    image = f"{published.registry}/node-maintenance-operator@{published.digest('operator', HEAD)}"
    script = (
        "import json, ssl, urllib.request\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount/'\n"
        "token = open(sa + 'token').read()\n"
        "request = urllib.request.Request('https://kubernetes.default.svc/version', headers={'Authorization': 'Bearer ' + token})\n"
        "print(json.load(urllib.request.urlopen(request, context=ssl.create_default_context(cafile=sa + 'ca.crt')))['gitVersion'])\n"
    )
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "probe", "image": image, "command": ["python3", "-c", script],
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
            }],
        },
    }
    real_cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))

    def ended() -> dict[str, Any] | None:
        probe = _json(real_cluster, "get", "pod", "probe", "-n", namespace)
        return probe if (probe.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None

    # The first pod from this image pulls it into the real node and starts Python: bounded as the OLM tests bound the
    # operator's pods (300 s), which a machine building images beside the tests slows (120 s ran out at a load of 10).
    probe = eventually(ended, "the probe pod ended", timeout=300)
    assert probe["status"]["phase"] == "Succeeded", probe["status"]
    assert probe["spec"]["nodeName"] == REAL_NODE
    assert real_cluster.kubectl("logs", "-n", namespace, "probe").stdout.strip().startswith("v1.37")


@pytest.fixture(scope="module")
def operator_namespace(real_cluster: Cluster) -> str:
    return f"nmo-{uuid.uuid4().hex[:6]}"


@pytest.mark.parametrize("version", RELEASES)
def test_each_release_runs_from_its_image_under_its_csv(real_cluster: Cluster, published: Published, operator_namespace: str, version: str) -> None:
    """In release order, as an upgrade would: each release's CRD and CSV Deployment, its image, a drain."""
    installed = install(real_cluster, published.inputs(), version, operator_namespace)
    applied = time.monotonic()  # installing ends with applying the CSV's Deployment
    pod = wait_ready(real_cluster, installed)
    TIMINGS[version] = time.monotonic() - applied
    status = pod["status"]["containerStatuses"][0]
    # Started once: neither a crash nor its liveness probe restarted it on the way to Ready. The one restart allowed is
    # the runtime's: a container runc could not start (StartError: "unable to create new parent process", at a load
    # average of 36), whose process never ran.
    started_once = status["restartCount"] == 0 or (
        status["restartCount"] == 1 and ((status.get("lastState") or {}).get("terminated") or {}).get("reason") == "StartError")
    assert started_once, status.get("lastState")
    assert pod["spec"]["nodeName"] == REAL_NODE
    assert status["imageID"].rsplit("@", 1)[1] == published.digest("operator", version)
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and container["securityContext"]["runAsNonRoot"] is True
    exec_ = ["exec", "-n", operator_namespace, pod["metadata"]["name"], "--", "python3", "-c"]
    assert real_cluster.kubectl(*exec_, "import os; print(os.getuid())").stdout.strip() == NON_ROOT_UID
    denied = real_cluster.kubectl(*exec_, "open('/written', 'w')", check=False)
    assert denied.returncode != 0 and "Read-only file system" in denied.stderr
    drain_a_kwok_node(real_cluster, "v1alpha1")  # every release serves v1alpha1


def test_the_newest_release_serves_conversion_through_its_service(real_cluster: Cluster, published: Published, operator_namespace: str) -> None:
    name = f"nm-{uuid.uuid4().hex[:6]}"
    nm = {"apiVersion": f"{GROUP}/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": name},
          "spec": {"nodeName": "absent-node", "reason": "read in every version", "drain": {"timeoutSeconds": 600}}}
    real_cluster.kubectl("apply", "-f", "-", input=json.dumps(nm))
    try:
        for version in VERSIONS:
            obj = _json(real_cluster, "get", f"{PLURAL}.{version}.{GROUP}", name)
            assert obj["apiVersion"] == f"{GROUP}/{version}"
            assert obj["spec"]["reason"] == "read in every version"
        assert _json(real_cluster, "get", f"{PLURAL}.v1beta1.{GROUP}", name)["spec"]["drain"]["timeoutSeconds"] == 600
    finally:
        real_cluster.kubectl("delete", f"{PLURAL}.v1beta1.{GROUP}", name, "--wait=false")
    print(f"\nimages published in {published.seconds:.1f}s; operator pod Ready after apply: "
          + ", ".join(f"{v} {s:.1f}s" for v, s in TIMINGS.items()))

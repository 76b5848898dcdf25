"""The harness is a real control plane: controllers, scheduler, disruption budgets and KWOK kubelets act."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster.cluster import Cluster
from devcluster.waiting import ClusterError

from .helpers import apply, deployment, eventually, pdb

pytestmark = pytest.mark.e2e


def _available(cluster: Cluster, namespace: str) -> int:
    out = cluster.kubectl("get", "deploy", "web", "-n", namespace, "-o", "jsonpath={.status.availableReplicas}")
    return int(out.stdout or 0)


def _disruptions_allowed(cluster: Cluster, namespace: str) -> int | None:
    out = cluster.kubectl("get", "pdb", "web", "-n", namespace, "-o", "json")
    status = json.loads(out.stdout).get("status", {})
    return status.get("disruptionsAllowed") if status.get("observedGeneration") else None


@pytest.fixture
def web(cluster: Cluster, namespace: str, nodes: Callable[..., list[str]]) -> tuple[str, list[str]]:
    """Three replicas pinned to two KWOK nodes, available, under a PDB with minAvailable 2."""
    names = nodes(2)
    apply(cluster, deployment("web", namespace, names, 3))
    eventually(lambda: _available(cluster, namespace) == 3, "deployment web has 3 available replicas")
    apply(cluster, pdb("web", namespace, {"app": "web"}, minAvailable=2))
    return namespace, names


def test_deployment_becomes_available_on_kwok_nodes(cluster: Cluster, web: tuple[str, list[str]]) -> None:
    namespace, names = web
    pods = json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    assert len(pods) == 3
    assert {pod["spec"]["nodeName"] for pod in pods} <= set(names)
    assert all(pod["status"]["phase"] == "Running" for pod in pods)


def test_disruption_controller_computes_allowed_disruptions(cluster: Cluster, web: tuple[str, list[str]]) -> None:
    namespace, _ = web
    eventually(lambda: _disruptions_allowed(cluster, namespace) == 1, "PDB web reports disruptionsAllowed == 1")


def test_eviction_honours_the_pdb(cluster: Cluster, web: tuple[str, list[str]]) -> None:
    namespace, names = web
    eventually(lambda: _disruptions_allowed(cluster, namespace) == 1, "PDB web allows one disruption")
    for name in names:  # replacements must stay Pending, so the budget cannot recover
        cluster.kubectl("cordon", name)
    core = client.CoreV1Api(cluster.api_client())
    pods = core.list_namespaced_pod(namespace, label_selector="app=web").items

    def evict(pod: client.V1Pod) -> None:
        assert pod.metadata is not None and pod.metadata.name is not None
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=namespace))
        core.create_namespaced_pod_eviction(pod.metadata.name, namespace, body)

    evict(pods[0])
    with pytest.raises(ApiException) as refused:
        evict(pods[1])
    assert refused.value.status == 429
    assert "disruption budget" in (refused.value.body or "")


def test_daemonset_runs_one_pod_per_kwok_node(cluster: Cluster, namespace: str, nodes: Callable[..., list[str]]) -> None:
    names = nodes(2, labels={"harness-ds": namespace})
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "nodeSelector": {"harness-ds": namespace},
                    "containers": [{"name": "agent", "image": "registry.invalid/agent:1"}],
                },
            },
        },
    }
    apply(cluster, daemonset)

    def placed() -> bool:
        pods = json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return sorted(p["spec"]["nodeName"] for p in running) == sorted(names)

    eventually(placed, "one running agent pod on each labelled node")


def test_cordon_makes_node_lifecycle_controller_taint_the_node(cluster: Cluster, nodes: Callable[..., list[str]]) -> None:
    (name,) = nodes(1)
    cluster.kubectl("cordon", name)

    def tainted() -> bool:
        node = json.loads(cluster.kubectl("get", "node", name, "-o", "json").stdout)
        taints = node["spec"].get("taints") or []
        return any(t["key"] == "node.kubernetes.io/unschedulable" and t["effect"] == "NoSchedule" for t in taints)

    eventually(tainted, f"node {name} carries node.kubernetes.io/unschedulable:NoSchedule")


@pytest.mark.parametrize("verb", ["apply", "create"])
def test_a_manifest_with_a_field_the_api_does_not_know_fails_the_call(cluster: Cluster, namespace: str, verb: str) -> None:
    """The API server checks the fields of what the tests write (kubectl's own check costs more than the write): a
    misspelt field fails the test that wrote it, as kubectl's strict check would, rather than being dropped."""
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"typo-{verb}", "namespace": namespace}, "dta": {"a": "1"}}
    with pytest.raises(ClusterError, match='unknown field "dta"'):
        cluster.kubectl(verb, "-f", "-", input=json.dumps(manifest))

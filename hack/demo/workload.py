"""The workload of the node the demo maintains: what a worker node of a real cluster carries.

Deployments under PodDisruptionBudgets, a StatefulSet under one, a DaemonSet and a bare pod (and, in
``kubevirt``, a pod shaped like KubeVirt's virt-launcher pod). Their pods run on the KWOK workers only:
they tolerate the taint that marks a simulated node and need the worker role, so the real node stays free.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.cluster import KWOK_TAINT

APPS = "shop"  # the namespace of the applications
WORKER_ROLE = "node-role.kubernetes.io/worker"
KWOK_TOLERATION = {"key": KWOK_TAINT["key"], "operator": "Exists", "effect": KWOK_TAINT["effect"]}
IMAGE = "registry.invalid/shop/{}:1"  # KWOK's pods run nothing: the image is never pulled
# name: (replicas, PodDisruptionBudget spec)
DEPLOYMENTS = {"web": (3, {"minAvailable": 2}), "api": (2, {"maxUnavailable": 1})}
STATEFUL = ("db", 2, {"maxUnavailable": 1})
DAEMON = "node-exporter"
BARE = "debug-shell"


def describe() -> str:
    """The workload in a sentence, from the same definitions ``objects`` uses."""
    def budget_text(spec: dict[str, Any]) -> str:
        return ", ".join(f"{key} {value}" for key, value in spec.items())

    deployments = " and ".join(f"{name} ({replicas} replicas, PodDisruptionBudget {budget_text(pdb)})"
                               for name, (replicas, pdb) in DEPLOYMENTS.items())
    name, replicas, pdb = STATEFUL
    return (f"In namespace {APPS}: Deployments {deployments}, StatefulSet {name} ({replicas} replicas, "
            f"PodDisruptionBudget {budget_text(pdb)}), DaemonSet {DAEMON} on every worker, and a bare pod {BARE}, owned by nothing.")


def worker_spec(container: str, **extra: Any) -> dict[str, Any]:
    """A pod spec that lands on a KWOK worker node and leaves within a second when evicted."""
    return {
        "terminationGracePeriodSeconds": 1,
        "tolerations": [KWOK_TOLERATION],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": WORKER_ROLE, "operator": "Exists"}]}]}}},
        "containers": [{"name": container, "image": IMAGE.format(container)}],
        **extra,
    }


def _meta(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, **extra}


def _template(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": name}}, "spec": worker_spec(name)}


def budget(name: str, namespace: str, selector: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(name, namespace),
            "spec": {"selector": {"matchLabels": selector}, **spec}}


def objects(node: str) -> list[dict[str, Any]]:
    """Everything to create; bare pods name ``node``, the rest is placed by the scheduler."""
    items: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPS}}]
    for name, (replicas, pdb) in DEPLOYMENTS.items():
        items.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, APPS),
                      "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": _template(name)}})
        items.append(budget(name, APPS, {"app": name}, pdb))
    name, replicas, pdb = STATEFUL
    items.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(name, APPS),
                  "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                           "selector": {"matchLabels": {"app": name}}, "template": _template(name)}})
    items.append(budget(name, APPS, {"app": name}, pdb))
    items.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(DAEMON, APPS),
                  "spec": {"selector": {"matchLabels": {"app": DAEMON}}, "template": _template(DAEMON)}})
    items.append({"apiVersion": "v1", "kind": "Pod", "metadata": _meta(BARE, APPS, labels={"app": BARE}),
                  "spec": worker_spec(BARE, nodeName=node)})
    return items


def expected_pods(objects: list[dict[str, Any]], workers: int) -> int:
    """How many pods ``objects`` make once every controller has done its part (a DaemonSet's on each worker)."""
    per_kind: dict[str, Callable[[dict[str, Any]], int]] = {"Pod": lambda o: 1, "DaemonSet": lambda o: workers,
                "Deployment": lambda o: o["spec"]["replicas"], "StatefulSet": lambda o: o["spec"]["replicas"]}
    return sum(per_kind[o["kind"]](o) for o in objects if o["kind"] in per_kind)


def ready(pods: list[dict[str, Any]]) -> int:
    """Pods Ready and not on their way out."""
    return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")
               and any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])))

"""The watch-driven drain engine: budgets pace evictions, the timeout counts from the drain's start,
and a drained node costs no requests until something lands on it."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import USER as OPERATOR_USER
from devcluster.operator import OperatorProcess

from .helpers import NM, apply, create_nm, delete_nm, deployment, eventually, evictions, existing, get, nm_status, pdb, pod, pods_on, pods_running

pytestmark = pytest.mark.e2e


def _time(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def test_budgeted_drain_sends_no_more_evictions_than_the_budget_allows(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    target, spare = nodes(2)
    labels = {"app": "paced"}
    cluster.kubectl("cordon", spare)
    apply(cluster, deployment("paced", namespace, [target, spare], 6, labels), pdb("paced", namespace, labels, maxUnavailable=1))
    pods_running(cluster, namespace, 6)
    eventually(lambda: (get(cluster, "pdb", "paced", "-n", namespace) or {}).get("status", {}).get("disruptionsAllowed") == 1, "PDB allows 1")
    cluster.kubectl("uncordon", spare)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded", timeout=120)
    assert not pods_on(cluster, target)
    sent = evictions(cluster, namespace)
    refused = evictions(cluster, namespace, code=429)
    # Six pods, one disruption at a time: each eviction waits for the budget instead of being refused.
    assert len(sent) - len(refused) == 6
    assert len(refused) <= 1, f"{len(refused)} evictions refused by the budget"
    delete_nm(cluster, name)


def test_timeout_counts_from_the_drain_start_after_waiting_for_the_node(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    node_name = f"late-{int(time.time() * 1000) % 10**8}"
    name = f"nm-{node_name}"
    create_nm(cluster, name, node_name, timeoutSeconds=15)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Failed", "Failed while the node is missing")
    time.sleep(30)  # longer than the whole timeout
    # Bound to the node before it exists, so the drain finds it when it takes the node. A finalizer holds the
    # evicted pod, so the drain cannot finish before the timeout.
    apply(cluster, pod("held", namespace, node_name, finalizers=["e2e.test/hold"]))
    cluster.create_kwok_node(node_name)
    try:
        cluster.wait_node_ready(node_name)
        running = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Running" and "held" in s.get("pendingPods", []) and s,
                             "draining the node once it exists")
        created = _time(existing(cluster, NM, name)["metadata"]["creationTimestamp"])
        started = _time(running["drainStartTime"])
        assert (started - created).total_seconds() >= 30, "drainStartTime is not when the drain began"
        failed = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Failed" and "timed out" in s.get("lastError", "") and s,
                            "Failed after its timeout", timeout=60)
        assert (_time(failed["lastUpdate"]) - started).total_seconds() >= 15, "timed out before its whole timeout had passed"
        assert f"{namespace}/held" in failed["lastError"]
    finally:
        cluster.kubectl("patch", "pod", "held", "-n", namespace, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]', check=False)
        delete_nm(cluster, name)
        cluster.kubectl("delete", "node", node_name, "--wait=false", "--ignore-not-found")


def test_drained_node_costs_no_requests_until_a_pod_lands(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded")
    time.sleep(2)  # the last requests of the drain reach the audit log
    before = len(cluster.audit_events(OPERATOR_USER))
    time.sleep(12)  # longer than any poll interval the operator ever had
    idle = cluster.audit_events(OPERATOR_USER)[before:]
    assert not [e for e in idle if e["verb"] in ("get", "list")], [e["requestURI"] for e in idle][:5]
    tolerant = {"tolerations": [{"key": "kubevirt.io/drain", "operator": "Exists"}, {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}
    apply(cluster, pod("late", namespace, target, spec=tolerant))
    eventually(lambda: not any(p["metadata"]["name"] == "late" for p in pods_on(cluster, target)), "the late pod is evicted", timeout=30)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "Succeeded again")
    delete_nm(cluster, name)

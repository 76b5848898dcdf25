"""Pods and nodes of odd shapes under a drain, each compared with what
`kubectl drain --ignore-daemonsets --delete-emptydir-data --force` does with it:

| pod | kubectl drain (those flags) | NodeMaintenance |
| --- | --- | --- |
| no owner | deleted, with a warning (--force) | evicted |
| controller of a kind nobody serves | evicted (it has a controller) | evicted |
| controller already deleted | evicted (it names a controller) | evicted, or gone first by the garbage collector |
| phase Unknown | evicted | evicted |
| finalizer that never finishes | waits until --timeout | waits; at timeoutSeconds Failed, naming the pod |
| DaemonSet pod, DaemonSet gone | deleted, with a warning (--force) | evicted, or gone first by the garbage collector |

A node with a stale holder, our taint already on it and many taints of others is taken and given back
with the others' taints intact; a node deleted in the middle fails the maintenance with a clear error."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.drain.nodes import HOLDER, TAINT

from ..helpers import apply, create_nm, delete_nm, eventually, get, nm_status, our_taint, pod, pods_on
from ..helpers import node as node_of
from .operator_log import errors_about

pytestmark = pytest.mark.e2e
TIMEOUT = 20


def _owner(kind: str, api_version: str, name: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": str(uuid.uuid4()), "controller": True}


def test_pods_of_odd_shapes_get_a_clear_outcome(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]],
                                                 tally: Counter[str]) -> None:
    (target,) = nodes(1)
    shapes = {
        "bare": pod("bare", namespace, target),
        "alien-owner": pod("alien-owner", namespace, target, ownerReferences=[_owner("Widget", "example.com/v1", "w")]),
        "owner-deleted": pod("owner-deleted", namespace, target, ownerReferences=[_owner("ReplicaSet", "apps/v1", "gone-rs")]),
        "unknown-phase": pod("unknown-phase", namespace, target),
        "stuck": pod("stuck", namespace, target, finalizers=["e2e.test/never"]),
        "daemonset-gone": pod("daemonset-gone", namespace, target, ownerReferences=[_owner("DaemonSet", "apps/v1", "gone-ds")]),
    }
    apply(cluster, *shapes.values())
    tally["pods of odd shapes"] += len(shapes)
    eventually(lambda: {p["metadata"]["name"] for p in pods_on(cluster, target) if p["status"].get("phase") == "Running"}
               >= {"bare", "alien-owner", "unknown-phase", "stuck"}, "the pods running")
    cluster.kubectl("patch", "pod", "unknown-phase", "-n", namespace, "--subresource=status", "--type=merge", "-p", '{"status":{"phase":"Unknown"}}')
    name = f"nm-{target}"
    create_nm(cluster, name, target, timeoutSeconds=TIMEOUT)
    try:
        failed = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Failed" and s, "Failed at its timeout", timeout=TIMEOUT + 40)
        assert f"{namespace}/stuck" in failed["lastError"] and "timed out" in failed["lastError"], failed["lastError"]
        assert "still terminating" in failed["lastError"] and "stays cordoned until this NodeMaintenance is deleted" in failed["lastError"]
        assert failed["pendingPods"] == ["stuck"], failed["pendingPods"]
        left = {p["metadata"]["name"]: p for p in pods_on(cluster, target)}
        assert left["stuck"]["metadata"].get("deletionTimestamp"), "the stuck pod was never evicted"
        assert set(left) <= {"stuck", "daemonset-gone"}, f"left on the node: {sorted(left)}"
        # The DaemonSet pod whose DaemonSet is gone is evicted (kubectl drain --force), unless the garbage collector deleted it first.
        eventually(lambda: "daemonset-gone" not in {p["metadata"]["name"] for p in pods_on(cluster, target)}, "the orphan deleted", timeout=30)
        assert operator.process is not None and operator.process.alive() and not errors_about(operator, name)
        drained = node_of(cluster, target)
        assert drained["spec"].get("unschedulable") and our_taint(drained)
    finally:
        cluster.kubectl("patch", "pod", "stuck", "-n", namespace, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]', check=False)
        delete_nm(cluster, name)
    assert not node_of(cluster, target)["spec"].get("unschedulable")


def test_a_node_with_a_stale_holder_and_many_taints_is_taken_and_given_back(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]],
                                                                             tally: Counter[str]) -> None:
    others = [{"key": f"example.com/t{i}", "value": "v", "effect": "PreferNoSchedule"} for i in range(50)]
    (target,) = nodes(1, taints=[*others, dict(TAINT)])
    cluster.kubectl("annotate", "node", target, f"{HOLDER}=maintenance-long-gone")
    tally["nodes of odd shapes"] += 1
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    try:
        eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "taken over and drained")
        taken = node_of(cluster, target)
        assert taken["metadata"]["annotations"][HOLDER] == name and taken["spec"].get("unschedulable")
        assert sum(t["key"] == TAINT["key"] for t in taken["spec"]["taints"]) == 1, "our taint twice"
    finally:
        delete_nm(cluster, name)
    released = node_of(cluster, target)
    assert not released["spec"].get("unschedulable") and HOLDER not in (released["metadata"].get("annotations") or {})
    assert [t for t in released["spec"].get("taints") or [] if t["key"].startswith("example.com/")] == others


def test_a_node_deleted_during_the_maintenance_fails_it_clearly(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]],
                                                                tally: Counter[str]) -> None:
    (target,) = nodes(1)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "drained")
    tally["nodes of odd shapes"] += 1
    cluster.kubectl("delete", "node", target)
    failed = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Failed" and s, "Failed once the node is gone")
    assert f"node {target!r} not found" in failed["lastError"] and "starts when a node of that name exists" in failed["lastError"]
    delete_nm(cluster, name)  # no finalizer left behind
    assert get(cluster, "nodemaintenances.v1beta1.nodemaintenance.kubevirt.io", name) is None

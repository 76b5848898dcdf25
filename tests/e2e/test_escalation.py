"""A drain a PodDisruptionBudget deadlocks: its escalation ladder deletes the blocked pod once afterSeconds have
passed since drainStartTime and never before, naming it with the budget it bypassed, as kubectl nm plan --escalation
said it would; onTimeout HandBack gives the node back exactly as it was at the timeout, and the maintenance, timed
out, never takes it again."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.api import GROUP, timestamps
from node_maintenance.drain import status
from node_maintenance.drain.plans import Action, OnTimeout

from .helpers import apply, create_nm, delete_nm, eventually, get, kubectl_nm, nm_status, node, pdb, pod, replan

pytestmark = pytest.mark.e2e

AFTER_SECONDS = 8


def _deadlocked(cluster: Cluster, namespace: str, target: str) -> dict[str, Any]:
    """A bare pod on ``target`` whose budget lets none of its pods go: eviction alone never drains the node."""
    blocked = pod("blocked", namespace, target, labels={"app": "blocked"})
    apply(cluster, blocked, pdb("blocked", namespace, {"app": "blocked"}, minAvailable=1))
    eventually(lambda: (get(cluster, "pdb", "blocked", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 1,
               "the budget counts the pod healthy")
    return blocked


def _pod(cluster: Cluster, namespace: str) -> dict[str, Any] | None:
    return get(cluster, "pod", "blocked", "-n", namespace)


def _as_before(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """The node as it was before the maintenance, in all a maintenance changes: schedulability, taints (but the
    node controller's own, which follows schedulability a moment later), labels and annotations (controllers may
    add their own meanwhile), and no record of ours."""
    def taints(node_obj: dict[str, Any]) -> list[dict[str, Any]]:
        return [t for t in node_obj["spec"].get("taints") or [] if not t["key"].startswith("node.kubernetes.io/")]
    annotations = after["metadata"].get("annotations") or {}
    return (bool(after["spec"].get("unschedulable")) == bool(before["spec"].get("unschedulable")) and taints(after) == taints(before)
            and before["metadata"]["labels"].items() <= after["metadata"]["labels"].items()
            and (before["metadata"].get("annotations") or {}).items() <= annotations.items()
            and not any(key.startswith(f"{GROUP}/") for key in annotations))


def test_delete_pods_removes_the_blocked_pod_after_its_time_never_before(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    _deadlocked(cluster, namespace, target)
    (step,) = kubectl_nm(cluster, "plan", target, "--escalation", f"{AFTER_SECONDS}s:{Action.DELETE_PODS}", "-o", "json").json()["escalation"]
    assert [(p["name"], p["budget"]) for p in step["pods"]] == [("blocked", f"{namespace}/blocked")] and step["at"] is None
    name = f"nm-{target}"
    create_nm(cluster, name, target, escalation=[{"afterSeconds": AFTER_SECONDS, "action": Action.DELETE_PODS}])
    # Every look at the pod from the maintenance's creation on, with the moment its answer was in: (seen at, deleting).
    seen: list[tuple[float, bool]] = []
    while True:
        current = _pod(cluster, namespace)
        deleting = current is None or bool(current["metadata"].get("deletionTimestamp"))
        seen.append((time.time(), deleting))
        if deleting:
            break
        assert len(seen) < 600, "the blocked pod was never deleted"
        time.sleep(0.2)
    stored = nm_status(cluster, name)
    started = timestamps.parse(stored["drainStartTime"]).timestamp()
    (step,) = kubectl_nm(cluster, "plan", target, "--escalation", "-o", "json").json()["escalation"]  # the maintenance's own ladder
    assert timestamps.parse(step["at"]).timestamp() == started + AFTER_SECONDS
    # A deletion seen by then happened by then: it must not be seen before the step's time.
    assert all(not deleting or at >= started + AFTER_SECONDS for at, deleting in seen), (stored["drainStartTime"], seen)
    assert any(not deleting for _, deleting in seen)
    entry = eventually(lambda: next(iter(nm_status(cluster, name).get("escalatedPods") or []), None), "status.escalatedPods")
    assert (entry["namespace"], entry["name"], entry["action"], entry["budget"]) == (namespace, "blocked", Action.DELETE_PODS, f"{namespace}/blocked")
    assert timestamps.parse(entry["time"]) >= timestamps.parse(stored["drainStartTime"]) + datetime.timedelta(seconds=AFTER_SECONDS)
    events = eventually(lambda: [e for e in (get(cluster, "events", "-n", namespace, "--field-selector",
                                                  "involvedObject.kind=Pod,involvedObject.name=blocked") or {}).get("items", [])
                                 if e["reason"] == Action.DELETE_PODS], "the event on the pod")
    assert f"bypassing PodDisruptionBudget {namespace}/blocked" in events[0]["message"]
    told = get(cluster, "events", "-A", "--field-selector", f"involvedObject.kind=NodeMaintenance,involvedObject.name={name}")
    assert any(e["reason"] == Action.DELETE_PODS and e["message"] == events[0]["message"] for e in (told or {}).get("items", []))
    assert f'node_maintenance_escalations_total{{action="{Action.DELETE_PODS}"}} 1.0' in operator.metrics()
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "drained once the pod is gone")
    delete_nm(cluster, name)


def test_hand_back_at_the_timeout_restores_the_node_and_takes_it_never_again(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    other = {"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}
    (target,) = nodes(1, labels={"e2e/pool": "escalation"}, taints=[other])
    _deadlocked(cluster, namespace, target)
    before = node(cluster, target)
    name = f"nm-{target}"
    create_nm(cluster, name, target, timeoutSeconds=3, onTimeout=OnTimeout.HAND_BACK)
    eventually(lambda: node(cluster, target)["spec"].get("unschedulable"), "the node taken")
    eventually(lambda: status.timed_out(nm_status(cluster, name)), "TimedOut", timeout=30)
    stored = nm_status(cluster, name)
    timed_out = next(c for c in stored["conditions"] if c["type"] == status.TIMED_OUT)
    assert timed_out["reason"] == status.HANDED_BACK and f"{namespace}/blocked" in timed_out["message"]
    assert stored["phase"] == "Failed"
    eventually(lambda: _as_before(before, node(cluster, target)), "the node given back once its status says so")
    replan(cluster, name)  # it has ended: planning again changes nothing
    assert _as_before(before, node(cluster, target))
    assert _pod(cluster, namespace) is not None  # nothing escalated: the pod stays
    delete_nm(cluster, name)
    assert _as_before(before, node(cluster, target))

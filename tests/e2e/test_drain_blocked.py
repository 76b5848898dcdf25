"""A stuck drain explains itself: each PodDisruptionBudget holding it is named in the status with its counts
and whether an admin must act (structural) or waiting helps (temporary), under the DrainBlocked condition;
a structural block fires one event."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.drain import blocking

from .helpers import apply, create_nm, delete_nm, deployment, eventually, get, nm_status, pdb, replan

pytestmark = pytest.mark.e2e


def _blocked(cluster: Cluster, name: str, reason: str) -> dict[str, Any] | None:
    status = nm_status(cluster, name)
    condition: dict[str, Any] = next((c for c in status.get("conditions") or [] if c["type"] == blocking.CONDITION), {})
    return status if condition.get("status") == "True" and condition.get("reason") == reason and status.get("blockingBudgets") else None


def _deadlock_events(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    events = get(cluster, "events", "-A", "--field-selector", f"involvedObject.kind=NodeMaintenance,involvedObject.name={name}")
    return [e for e in (events or {}).get("items", []) if e["reason"] == blocking.Reason.DEADLOCK]


def _ready(cluster: Cluster, namespace: str, app: str, count: int) -> None:
    eventually(lambda: (get(cluster, "deployment", app, "-n", namespace) or {}).get("status", {}).get("readyReplicas") == count,
               f"{count} {app} pods ready")


def test_a_structural_block_is_named_fires_once_and_clears_when_the_admin_acts(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    target, spare = nodes(2)
    labels = {"app": "strict"}
    cluster.kubectl("cordon", spare)
    apply(cluster, deployment("strict", namespace, [target, spare], 2, labels), pdb("strict", namespace, labels, minAvailable=2))
    _ready(cluster, namespace, "strict", 2)
    cluster.kubectl("uncordon", spare)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    status = eventually(lambda: _blocked(cluster, name, blocking.Reason.DEADLOCK), "DrainBlocked: PodDisruptionBudgetDeadlock")
    (entry,) = status["blockingBudgets"]
    assert (entry["namespace"], entry["name"], entry["block"]) == (namespace, "strict", "Structural")
    assert (entry["disruptionsAllowed"], entry["currentHealthy"], entry["desiredHealthy"], entry["expectedPods"]) == (0, 2, 2, 2)
    assert entry["blockedPods"] == 2 and "minAvailable 2" in entry["message"]
    eventually(lambda: _deadlock_events(cluster, name), "the deadlock event")
    replan(cluster, name)
    events = _deadlock_events(cluster, name)
    assert len(events) == 1 and events[0].get("count", 1) == 1 and f"{namespace}/strict" in events[0]["message"]

    cluster.kubectl("patch", "pdb", "strict", "-n", namespace, "--type=merge", "-p", json.dumps({"spec": {"minAvailable": 1}}))
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "drained once the budget allows it", timeout=60)
    done = nm_status(cluster, name)
    assert done["blockingBudgets"] == []
    assert next(c for c in done["conditions"] if c["type"] == blocking.CONDITION)["status"] == "False"
    delete_nm(cluster, name)


def test_a_temporary_block_waits_without_an_event_and_goes_on_by_itself(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    target, spare = nodes(2)
    labels = {"app": "web"}
    cluster.kubectl("cordon", spare)
    # Three pods on the node, and one more of the budget's pods that cannot start yet: 3 of 4 healthy,
    # the budget needs 3, so it allows nothing now, and will once the fourth runs.
    late = deployment("late", namespace, [f"{target}-absent"], 1, labels)
    apply(cluster, deployment("web", namespace, [target, spare], 3, labels), late, pdb("web", namespace, labels, minAvailable=3))
    _ready(cluster, namespace, "web", 3)
    cluster.kubectl("uncordon", spare)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    status = eventually(lambda: _blocked(cluster, name, blocking.Reason.TEMPORARY), "DrainBlocked: PodDisruptionBudgetTemporary")
    (entry,) = status["blockingBudgets"]
    assert (entry["name"], entry["block"], entry["disruptionsAllowed"]) == ("web", "Temporary", 0)
    assert (entry["currentHealthy"], entry["desiredHealthy"], entry["expectedPods"]) == (3, 3, 4)
    replan(cluster, name, 2)
    assert _deadlock_events(cluster, name) == []

    late["spec"]["template"]["spec"]["affinity"] = deployment("late", namespace, [spare], 1)["spec"]["template"]["spec"]["affinity"]
    apply(cluster, late)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "drained once the fourth pod runs", timeout=90)
    assert nm_status(cluster, name)["blockingBudgets"] == []
    delete_nm(cluster, name)

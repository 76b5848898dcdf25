"""What must hold whatever faults hit the operator: pure functions over objects as the API returns them.

Three kinds, each returning the violations it finds as sentences (empty: all holds):

* :func:`node_violations` holds at every instant: a node nobody holds is exactly as it was before,
  a node held is cordoned and tainted by a NodeMaintenance that still exists, and a NodeMaintenance
  that reports Succeeded holds its node.
* :func:`pdb_violations` holds at every instant: the ready pods a budget covers never drop below
  what it demands.
* :func:`settled_violations` holds once the operator has had time to catch up: every NodeMaintenance
  has drained its node, and none that was deleted is kept by a finalizer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from node_maintenance.api.objects import key_of
from node_maintenance.drain import budgets, nodes, pods

# Taints the node lifecycle controller manages itself (a cordoned node gets node.kubernetes.io/unschedulable).
_CONTROLLER_TAINT_PREFIX = "node.kubernetes.io/"


@dataclass(frozen=True)
class NodeBefore:
    """What a node looked like before any maintenance: what giving it back must restore."""

    unschedulable: bool
    taints: frozenset[tuple[str, str, str]]

    @classmethod
    def of(cls, node: dict[str, Any]) -> NodeBefore:
        return cls(bool(node.get("spec", {}).get("unschedulable")), _own_taints(node))


def _own_taints(node: dict[str, Any]) -> frozenset[tuple[str, str, str]]:
    """Taints set by whoever owns the node: neither ours nor the lifecycle controller's."""
    return frozenset(
        (t.get("key", ""), t.get("value", ""), t.get("effect", ""))
        for t in node.get("spec", {}).get("taints") or []
        if not (t.get("key") == nodes.TAINT["key"] and t.get("effect") == nodes.TAINT["effect"])
        and not t.get("key", "").startswith(_CONTROLLER_TAINT_PREFIX)
    )


def _deleting(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def node_violations(node: dict[str, Any], before: NodeBefore, maintenances: Iterable[dict[str, Any]]) -> list[str]:
    """Instant invariants of one node against every NodeMaintenance that exists."""
    name = node["metadata"]["name"]
    existing = {m["metadata"]["name"]: m for m in maintenances}
    holder = nodes.holder_of(node)
    unschedulable = bool(node.get("spec", {}).get("unschedulable"))
    found: list[str] = []
    if _own_taints(node) != before.taints:
        found.append(f"node {name}: taints not ours changed from {sorted(before.taints)} to {sorted(_own_taints(node))}")
    if holder is None:
        if unschedulable != before.unschedulable:
            found.append(f"node {name}: {'cordoned' if unschedulable else 'uncordoned'} while no NodeMaintenance holds it")
        if nodes.has_taint(node):
            found.append(f"node {name}: carries the drain taint while no NodeMaintenance holds it")
    else:
        if holder not in existing:
            found.append(f"node {name}: held by NodeMaintenance {holder}, which no longer exists")
        elif existing[holder]["spec"].get("nodeName") != name:
            found.append(f"node {name}: held by NodeMaintenance {holder}, which is for node {existing[holder]['spec'].get('nodeName')}")
        if not unschedulable or not nodes.has_taint(node):
            found.append(f"node {name}: held by {holder} but not cordoned and tainted")
    for m in existing.values():
        succeeded = (m.get("status") or {}).get("phase") == "Succeeded"
        if m["spec"].get("nodeName") == name and succeeded and not _deleting(m) and holder != m["metadata"]["name"]:
            found.append(f"node {name}: NodeMaintenance {m['metadata']['name']} reports Succeeded but the node is held by {holder}")
    return found


def _healthy(pod: dict[str, Any]) -> bool:
    """Counted by the disruption controller: ready and not on its way out."""
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])
    return ready and not _deleting(pod)


def _scaled(value: int | str, total: int) -> int:
    """intstr: an integer as is, a percentage of ``total`` rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def desired_healthy(budget: dict[str, Any]) -> int | None:
    """The fewest healthy pods ``budget`` allows, from its spec and the pods it expects; None before it counted any."""
    expected: int | None = (budget.get("status") or {}).get("expectedPods")
    if not expected:
        return None
    spec = budget.get("spec") or {}
    if spec.get("minAvailable") is not None:
        return _scaled(spec["minAvailable"], expected)
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - _scaled(spec["maxUnavailable"], expected))
    return None


def pdb_violations(budget_list: Iterable[dict[str, Any]], pod_list: list[dict[str, Any]]) -> list[str]:
    """Budgets whose healthy pods are fewer than they demand."""
    found = []
    for budget in budget_list:
        desired = desired_healthy(budget)
        if desired is None:
            continue
        healthy = sum(1 for p in pod_list if budgets.covers(budget, p) and _healthy(p))
        if healthy < desired:
            found.append(f"PodDisruptionBudget {key_of(budget)}: {healthy} healthy pod(s), it demands {desired}")
    return found


def settled_violations(node_list: Iterable[dict[str, Any]], maintenances: Iterable[dict[str, Any]],
                       pod_list: Iterable[dict[str, Any]]) -> list[str]:
    """Once the operator caught up: no deleted NodeMaintenance left, each other one Succeeded on a drained node."""
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in pod_list:
        by_node.setdefault(pod.get("spec", {}).get("nodeName") or "", []).append(pod)
    known = {n["metadata"]["name"] for n in node_list}
    found = []
    for m in maintenances:
        name, node_name = m["metadata"]["name"], m["spec"].get("nodeName")
        if _deleting(m):
            found.append(f"NodeMaintenance {name}: deleted but still kept by finalizers {m['metadata'].get('finalizers')}")
            continue
        if node_name not in known:
            continue  # a maintenance of a missing node waits for it, by design
        phase = (m.get("status") or {}).get("phase")
        if phase != "Succeeded":
            found.append(f"NodeMaintenance {name}: {phase or 'no phase'}, not Succeeded ({(m.get('status') or {}).get('lastError', '')})")
        left = sorted(key_of(p) for p in by_node.get(node_name, []) if pods.must_go(p) and not _deleting(p))
        if left:
            found.append(f"NodeMaintenance {name}: node {node_name} not drained, {', '.join(left)} still there")
    return found

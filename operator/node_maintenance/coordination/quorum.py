"""Whether taking a control-plane node into maintenance would break etcd quorum, judged as medik8s does.

Where the etcd guard PodDisruptionBudget exists (OpenShift runs one guard pod per etcd member under
it), it decides: it allows a disruption only while every other member is healthy, so fewer than one
allowed disruption refuses. Elsewhere the control-plane nodes are counted: the ones Ready and not
already in maintenance must keep a majority of all control-plane nodes after this one goes.

A node already unready or in maintenance costs no further member, so it is allowed (medik8s likewise
allows a node whose etcd member is already disrupted). A cluster with a single control-plane node has no majority to keep (its only member is down during
any maintenance of it, whatever we decide), so it is left to the admin, as before this rule existed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from node_maintenance.api.conditions import Condition

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
ETCD_GUARD_NAMESPACE = "openshift-etcd"
ETCD_GUARD_PDBS = ("etcd-guard-pdb", "etcd-quorum-guard")  # the name since OpenShift 4.11, and before
# The condition of a maintenance the guard keeps from taking its node.
CONDITION = "QuorumGuard"


@dataclass(frozen=True)
class Members:
    """What the guard reads, fresh when a maintenance is about to take a control-plane node: every
    control-plane node (with its holder annotation) and the etcd guard budgets found."""

    control_plane: tuple[dict[str, Any], ...]
    etcd_guards: tuple[dict[str, Any], ...] = ()


def held_back(message: str) -> Condition:
    return Condition(CONDITION, "False", "WouldBreakEtcdQuorum", message)


def escalation_guarded(action: str, refused: str | None) -> Condition:
    """What the guard said when an escalation step (``action``) was due on a control-plane node: no pod is deleted by
    escalation while it refuses (``refused``: its reason), eviction goes on."""
    if refused:
        return Condition(CONDITION, "False", "WouldBreakEtcdQuorum", f"escalation {action} deletes no pod, eviction goes on: {refused}")
    return Condition(CONDITION, "True", "EtcdQuorumKept", f"escalation {action} may delete pods: the etcd-quorum guard allows it")


def is_control_plane(node: dict[str, Any]) -> bool:
    labels = node.get("metadata", {}).get("labels") or {}
    return any(label in labels for label in CONTROL_PLANE_LABELS)


def is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def refusal(node: dict[str, Any], control_plane: Iterable[dict[str, Any]], in_maintenance: set[str],
            etcd_guards: list[dict[str, Any]]) -> str | None:
    """Why taking ``node`` would break etcd quorum (the message names the rule that decided), or None.

    ``control_plane`` holds every control-plane node; ``in_maintenance`` the names of nodes that other
    NodeMaintenances already take; ``etcd_guards`` the etcd guard budgets found (usually none or one).
    """
    name = node["metadata"]["name"]
    if not is_control_plane(node):
        return None
    if etcd_guards:
        guard = etcd_guards[0]
        allowed = int((guard.get("status") or {}).get("disruptionsAllowed") or 0)
        if allowed < 1:
            return (f"node {name!r} is a control-plane node and, judged by the etcd quorum guard PodDisruptionBudget "
                    f"{ETCD_GUARD_NAMESPACE}/{guard['metadata']['name']}, which allows no disruption (disruptionsAllowed {allowed}), "
                    "taking it would break etcd quorum; wait until every etcd member is healthy and no other "
                    "control-plane node is in maintenance")
        return None
    members = {n["metadata"]["name"]: n for n in control_plane}
    members[name] = node
    total = len(members)
    if total < 2:
        return None
    available = sorted(n for n, obj in members.items() if is_ready(obj) and n not in in_maintenance)
    if name not in available:
        return None  # already unready or taken: its maintenance costs etcd no member it still has
    majority = total // 2 + 1
    left = len(available) - 1
    if left >= majority:
        return None
    return (f"node {name!r} is a control-plane node and, judged by the count of Ready control-plane nodes (the cluster "
            f"has no etcd guard PodDisruptionBudget in {ETCD_GUARD_NAMESPACE}), {len(available)} of {total} are Ready and not "
            f"in maintenance; taking it would leave {left}, fewer than the majority of {majority} etcd quorum needs; "
            "wait until the other control-plane nodes are Ready and out of maintenance")

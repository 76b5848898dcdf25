"""Whether taking a control-plane node into maintenance would break etcd quorum, judged as medik8s does.

Where the etcd guard PodDisruptionBudget exists (OpenShift runs one guard pod per etcd member under
it), it decides: it allows a disruption only while every other member is healthy, so fewer than one
allowed disruption refuses. Elsewhere the control-plane nodes are counted: the ones Ready and not
already in maintenance must keep a majority of all control-plane nodes after this one goes.

A node already unready or in maintenance costs no further member, so it is allowed (medik8s likewise
allows a node whose etcd member is already disrupted). A cluster with a single control-plane node has no majority to keep (its only member is down during
any maintenance of it, whatever we decide), so it is left to the admin, as before this rule existed.

An escalation step, which deletes pods past their budgets, asks again on the node its maintenance holds
(:func:`escalation_refusal`): the node then counts as the member going, and a guard pod is never deleted by it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from node_maintenance.api.conditions import Condition

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
ETCD_GUARD_NAMESPACE = "openshift-etcd"
ETCD_GUARD_PDBS = ("etcd-guard-pdb", "etcd-quorum-guard")  # the name since OpenShift 4.11, and before
# The guard budgets by namespace/name, as a drain names the budgets covering a pod.
ETCD_GUARD_KEYS = tuple(f"{ETCD_GUARD_NAMESPACE}/{name}" for name in ETCD_GUARD_PDBS)
# The condition of a maintenance the guard keeps from taking its node.
CONDITION = "QuorumGuard"


@dataclass(frozen=True)
class Members:
    """What the guard reads, fresh when a maintenance is about to take a control-plane node: every
    control-plane node (with its holder annotation) and the etcd guard budgets found."""

    control_plane: tuple[dict[str, Any], ...]
    etcd_guards: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class _Count:
    """The etcd members as the count of control-plane nodes sees them, ``node`` among them: how many there are, and how
    many others are Ready and not in maintenance (the members left once ``node`` goes). Takeover and escalation ask the
    same question of it: do the others keep a majority of all?"""

    total: int
    others_up: int

    @property
    def majority(self) -> int:
        return self.total // 2 + 1

    @classmethod
    def of(cls, node: dict[str, Any], control_plane: Iterable[dict[str, Any]], in_maintenance: set[str]) -> _Count:
        name = node["metadata"]["name"]
        members = {n["metadata"]["name"]: n for n in control_plane}
        members[name] = node
        up = sum(1 for n, obj in members.items() if n != name and is_ready(obj) and n not in in_maintenance)
        return cls(total=len(members), others_up=up)


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
    count = _Count.of(node, control_plane, in_maintenance)
    if count.total < 2 or not (is_ready(node) and name not in in_maintenance):
        return None  # no majority to keep; or already unready or taken: its maintenance costs etcd no member it still has
    if count.others_up >= count.majority:
        return None
    return (f"node {name!r} is a control-plane node and, judged by the count of Ready control-plane nodes (the cluster "
            f"has no etcd guard PodDisruptionBudget in {ETCD_GUARD_NAMESPACE}), {count.others_up + 1} of {count.total} are "
            f"Ready and not in maintenance; taking it would leave {count.others_up}, fewer than the majority of "
            f"{count.majority} etcd quorum needs; wait until the other control-plane nodes are Ready and out of maintenance")


def guards(budget_names: Iterable[str]) -> bool:
    """Whether a pod under the budgets named ``budget_names`` (namespace/name) is an etcd guard pod: escalation never
    deletes one, past the budget that counts the etcd members (its eviction alone, paced by that budget, takes it)."""
    return any(name in ETCD_GUARD_KEYS for name in budget_names)


def escalation_refusal(node: dict[str, Any], control_plane: Iterable[dict[str, Any]], in_maintenance: set[str],
                       etcd_guards: list[dict[str, Any]], guard_pod_here: bool) -> str | None:
    """Why an escalated deletion on ``node``, a control-plane node its own maintenance holds, would break etcd quorum
    (None: it would not); the arguments as for :func:`refusal`, and ``guard_pod_here`` whether the node's own guard pod is
    still on it, not being deleted.

    Unlike at takeover, the node is counted as the member going whatever it shows: the rule asks whether the others keep
    quorum without it. With a guard budget, once the node's guard pod has left, the budget counts this very member as
    the one disrupted and allows nothing more (disruptionsAllowed 0) for as long as the drain lasts; so it refuses
    only while another member is unhealthy too (currentHealthy below desiredHealthy; a terminating pod is not counted
    healthy). While the guard pod is still here, the guard has not agreed to this member going at all, and refuses as at
    takeover. Escalation itself never deletes a guard pod (:func:`guards`), so this is all it must keep.
    """
    name = node["metadata"]["name"]
    if etcd_guards:
        guard = etcd_guards[0]
        judged = f"judged by the etcd quorum guard PodDisruptionBudget {ETCD_GUARD_NAMESPACE}/{guard['metadata']['name']}"
        observed = guard.get("status") or {}
        if guard_pod_here:
            allowed = int(observed.get("disruptionsAllowed") or 0)
            if allowed < 1:
                return (f"node {name!r} is a control-plane node, its guard pod is still on the node and, {judged}, which allows "
                        f"no disruption (disruptionsAllowed {allowed}), its etcd member may not go yet; wait until every etcd "
                        "member is healthy and the guard pod is evicted")
            return None
        healthy, desired = observed.get("currentHealthy"), observed.get("desiredHealthy")
        if healthy is None or desired is None:  # in doubt, nothing is deleted
            return (f"node {name!r} is a control-plane node and, {judged}, which has not counted the etcd members yet, "
                    "its etcd quorum is not known; wait until the guard's status shows them")
        if int(healthy) < int(desired):
            return (f"node {name!r} is a control-plane node, its guard pod has left the node and, {judged}, another etcd "
                    f"member is unhealthy too (currentHealthy {healthy}, desiredHealthy {desired}); wait until the other "
                    "etcd members are healthy")
        return None
    count = _Count.of(node, control_plane, in_maintenance)
    if count.total < 2 or count.others_up >= count.majority:
        return None
    return (f"node {name!r} is a control-plane node in maintenance and, judged by the count of Ready control-plane nodes (the "
            f"cluster has no etcd guard PodDisruptionBudget in {ETCD_GUARD_NAMESPACE}), {count.others_up} of the other "
            f"{count.total - 1} control-plane nodes are Ready and not in maintenance, fewer than the majority of "
            f"{count.majority} etcd quorum needs; wait until the other control-plane nodes are Ready and out of maintenance")

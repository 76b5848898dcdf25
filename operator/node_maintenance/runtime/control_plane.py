"""The control plane as the etcd-quorum guard judges it: read when a control-plane node is about to be taken, and before
an escalation step deletes pods on one, never from a cache (a member that went away must be seen)."""

from __future__ import annotations

from typing import Any

from node_maintenance.api.paths import node_path
from node_maintenance.client.protocol import KubeApi
from node_maintenance.coordination import quorum
from node_maintenance.runtime.budget_watch import BudgetWatch


async def members(kube: KubeApi, budgets: BudgetWatch) -> quorum.Members:
    """Every control-plane node as it is now, and the etcd guard budgets the budget watch holds."""
    found: dict[str, dict[str, Any]] = {}
    for label in quorum.CONTROL_PLANE_LABELS:
        listing = await kube.request("GET", node_path(), query={"labelSelector": label})
        found.update({n["metadata"]["name"]: n for n in listing.get("items") or []})
    guards = [b for b in budgets.in_namespaces({quorum.ETCD_GUARD_NAMESPACE}) if b["metadata"]["name"] in quorum.ETCD_GUARD_PDBS]
    return quorum.Members(tuple(found.values()), tuple(guards[:1]))

"""Admission rules for new NodeMaintenances: pure decisions, plus the cluster reads they need."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .kube import Kube, nm_path, node_path

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
ETCD_GUARD_NAMESPACE = "openshift-etcd"
ETCD_GUARD_PDBS = ("etcd-guard-pdb", "etcd-quorum-guard")


def node_name_of(obj: dict[str, Any]) -> str:
    """The node an object names, in any served version (v1alpha3 defaults to its own name)."""
    return (obj.get("spec") or {}).get("nodeName") or (obj.get("metadata") or {}).get("name", "")


@dataclass(frozen=True)
class Facts:
    """What the rules need to know about the cluster."""

    node: dict[str, Any] | None
    maintenances: list[dict[str, Any]]
    etcd_guards: list[dict[str, Any]]


def deny_reason(obj: dict[str, Any], facts: Facts) -> str | None:
    """Why creating ``obj`` must be refused, or None to allow it."""
    name = (obj.get("metadata") or {}).get("name", "")
    node = node_name_of(obj)
    if facts.node is None:
        return (
            f"NodeMaintenance {name}: node {node!r} does not exist; "
            "set spec.nodeName to the name of an existing node (see `kubectl get nodes`)"
        )
    for other in facts.maintenances:
        other_name = other.get("metadata", {}).get("name")
        if other_name != name and node_name_of(other) == node:
            return (
                f"NodeMaintenance {name}: node {node!r} is already in maintenance by NodeMaintenance {other_name}; "
                f"delete {other_name} first, or keep using it"
            )
    labels = facts.node.get("metadata", {}).get("labels") or {}
    if any(label in labels for label in CONTROL_PLANE_LABELS):
        for pdb in facts.etcd_guards:
            if (pdb.get("status") or {}).get("disruptionsAllowed", 0) == 0:
                return (
                    f"NodeMaintenance {name}: node {node!r} is a control-plane node and the etcd quorum guard "
                    f"{ETCD_GUARD_NAMESPACE}/{pdb['metadata']['name']} allows no disruption; "
                    "wait until every etcd member is healthy and no other control-plane node is in maintenance"
                )
    return None


def gather_facts(kube: Kube, obj: dict[str, Any]) -> Facts:
    """Read the node, the existing NodeMaintenances and the etcd guard budgets (blocking calls)."""
    node_name = node_name_of(obj)
    node = kube.get(node_path(node_name)) if node_name else None
    maintenances = kube.request("GET", nm_path()).get("items", [])
    guards = [
        pdb
        for pdb_name in ETCD_GUARD_PDBS
        if (pdb := kube.get(f"/apis/policy/v1/namespaces/{ETCD_GUARD_NAMESPACE}/poddisruptionbudgets/{pdb_name}"))
    ]
    return Facts(node=node, maintenances=maintenances, etcd_guards=guards)

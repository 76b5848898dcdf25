"""Admission rules for new NodeMaintenances: pure decisions, plus the cluster reads they need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from node_maintenance.api import schema_check
from node_maintenance.api.paths import nm_path, node_path, policy_path
from node_maintenance.client import pages
from node_maintenance.client.errors import NotFound
from node_maintenance.client.protocol import BlockingKubeApi
from node_maintenance.coordination import quorum
from node_maintenance.policy import model


def node_name_of(obj: dict[str, Any]) -> str:
    """The node an object names, in any served version (v1alpha3 defaults to its own name); empty when it names none
    that can be read (:func:`unreadable` says why)."""
    spec, metadata = obj.get("spec"), obj.get("metadata")
    named = (spec.get("nodeName") if isinstance(spec, dict) else None) or (metadata.get("name", "") if isinstance(metadata, dict) else "")
    return named if isinstance(named, str) else ""


def unreadable(obj: dict[str, Any]) -> str | None:
    """Why the rules cannot judge ``obj``, naming the field and the fix; None when they can. Any object of the
    cluster is read through :func:`node_name_of`, so one that cannot be read takes no node, and refuses no other."""
    name = (obj.get("metadata") or {}).get("name", "")
    spec = obj.get("spec")
    problem = schema_check.problem(spec, {"type": "object"}, "spec") if spec is not None else None
    if problem is None and isinstance(spec, dict) and spec.get("nodeName") is not None:
        problem = schema_check.problem(spec["nodeName"], {"type": "string"}, "spec.nodeName")
    return f"NodeMaintenance {name}: {problem}; set spec.nodeName to the name of an existing node (see `kubectl get nodes`)" if problem else None


@dataclass(frozen=True)
class Facts:
    """What the rules need to know about the cluster."""

    node: dict[str, Any] | None
    maintenances: list[dict[str, Any]]
    etcd_guards: list[dict[str, Any]]
    control_plane: list[dict[str, Any]] = field(default_factory=list)  # every control-plane node, read for one only
    policy_drains: tuple[dict[str, Any], ...] = ()  # the drain defaults of the policies that select the node, when asked


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
    taken = {node_name_of(other) for other in facts.maintenances if other.get("metadata", {}).get("name") != name} - {""}
    refused = quorum.refusal(facts.node, facts.control_plane, taken, facts.etcd_guards)
    return f"NodeMaintenance {name}: {refused}" if refused else None


def _policy_drains(kube: BlockingKubeApi, node: dict[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """The drain defaults of the policies that select ``node`` (none before the policy CRD is installed). A policy that
    cannot be read governs nothing here, as in the decisions, where its own status says why."""
    if node is None:
        return ()
    try:
        bodies = list(pages.items(kube, policy_path()))
    except NotFound:
        return ()
    drains = []
    for body in bodies:
        try:
            policy = model.Policy.of(body)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if policy.selects(node):
            drains.append(dict(policy.drain))
    return tuple(drains)


def gather_facts(kube: BlockingKubeApi, obj: dict[str, Any], *, policies: bool = False) -> Facts:
    """Read the node and the existing NodeMaintenances, for a control-plane node the etcd guard budgets and the other
    control-plane nodes, and (``policies``) the drain defaults of the policies that select the node (blocking calls)."""
    node_name = node_name_of(obj)
    node = kube.get(node_path(node_name)) if node_name else None
    maintenances = list(pages.items(kube, nm_path()))
    drains = _policy_drains(kube, node) if policies else ()
    if node is None or not quorum.is_control_plane(node):
        return Facts(node=node, maintenances=maintenances, etcd_guards=[], policy_drains=drains)
    guards = [
        pdb
        for pdb_name in quorum.ETCD_GUARD_PDBS
        if (pdb := kube.get(f"/apis/policy/v1/namespaces/{quorum.ETCD_GUARD_NAMESPACE}/poddisruptionbudgets/{pdb_name}"))
    ]
    members = {n["metadata"]["name"]: n for label in quorum.CONTROL_PLANE_LABELS
               for n in kube.request("GET", node_path(), query={"labelSelector": label}).get("items", [])}
    return Facts(node=node, maintenances=maintenances, etcd_guards=guards[:1], control_plane=list(members.values()), policy_drains=drains)

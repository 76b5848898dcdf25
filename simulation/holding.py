"""A node in maintenance stays cordoned and tainted until its maintenance gives it back, and is then as it was.

:func:`node_violations` holds at every instant (the soak checks it against a real cluster): a node nobody holds is
exactly as it was before, a node held is cordoned and tainted by a NodeMaintenance that still exists, and a
NodeMaintenance that reports Succeeded holds its node. :func:`handback_violations` judges one step of a history: a node
is uncordoned only by the hand-back of the maintenance that holds it, a maintenance its timeout ended never takes
its node again, and one whose drain succeeded is never ended by its timeout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.drain import nodes, status
from simulation.history import ActionKind, History, last_free

# Taints the node lifecycle controller manages itself (a cordoned node gets node.kubernetes.io/unschedulable).
_CONTROLLER_TAINT_PREFIX = "node.kubernetes.io/"


@dataclass(frozen=True)
class NodeBefore:
    """What a node looked like before any maintenance: what giving it back must restore (a drain taint already there
    stays: the node records it)."""

    unschedulable: bool
    taints: frozenset[tuple[str, str, str]]
    drain_tainted: bool = False

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> NodeBefore:
        return cls(bool(node.get("spec", {}).get("unschedulable")), _own_taints(node), nodes.has_taint(dict(node)))


def _own_taints(node: Mapping[str, Any]) -> frozenset[tuple[str, str, str]]:
    """Taints set by whoever owns the node: neither ours nor the lifecycle controller's."""
    return frozenset(
        (t.get("key", ""), t.get("value", ""), t.get("effect", ""))
        for t in node.get("spec", {}).get("taints") or []
        if not (t.get("key") == nodes.TAINT["key"] and t.get("effect") == nodes.TAINT["effect"])
        and not t.get("key", "").startswith(_CONTROLLER_TAINT_PREFIX)
    )


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def node_violations(node: Mapping[str, Any], before: NodeBefore, maintenances: Iterable[Mapping[str, Any]]) -> list[str]:
    """Instant invariants of one node against every NodeMaintenance that exists: as it was before while nobody holds
    it, cordoned and tainted while held (:func:`held_violations`)."""
    name = node["metadata"]["name"]
    maintenances = list(maintenances)
    found: list[str] = []
    if _own_taints(node) != before.taints:
        found.append(f"node {name}: taints not ours changed from {sorted(before.taints)} to {sorted(_own_taints(node))}")
    if nodes.holder_of(dict(node)) is None:
        unschedulable = bool(node.get("spec", {}).get("unschedulable"))
        if unschedulable != before.unschedulable:
            found.append(f"node {name}: {'cordoned' if unschedulable else 'uncordoned'} while no NodeMaintenance holds it")
        if nodes.has_taint(dict(node)) and not before.drain_tainted:
            found.append(f"node {name}: carries the drain taint while no NodeMaintenance holds it")
    return found + held_violations(node, maintenances)


def held_violations(node: Mapping[str, Any], maintenances: Iterable[Mapping[str, Any]]) -> list[str]:
    """A node held is cordoned and tainted by a NodeMaintenance of that node that exists; one that reports Succeeded
    holds its node."""
    name = node["metadata"]["name"]
    existing = {m["metadata"]["name"]: m for m in maintenances}
    holder = nodes.holder_of(dict(node))
    found: list[str] = []
    if holder is not None:
        if holder not in existing:
            found.append(f"node {name}: held by NodeMaintenance {holder}, which no longer exists")
        elif existing[holder]["spec"].get("nodeName") != name:
            found.append(f"node {name}: held by NodeMaintenance {holder}, which is for node {existing[holder]['spec'].get('nodeName')}")
        if not node.get("spec", {}).get("unschedulable") or not nodes.has_taint(dict(node)):
            found.append(f"node {name}: held by {holder} but not cordoned and tainted")
    for m in existing.values():
        succeeded = (m.get("status") or {}).get("phase") == status.Phase.SUCCEEDED
        if m["spec"].get("nodeName") == name and succeeded and not deleting(m) and holder != m["metadata"]["name"]:
            found.append(f"node {name}: NodeMaintenance {m['metadata']['name']} reports Succeeded but the node is held by {holder}")
    return found


def patched_violations(history: History) -> list[str]:
    """The nodes the newest step patched, against how each was before its maintenance took it."""
    newest = history[-1]
    found = []
    for name in sorted(newest.patched()):
        node, free = newest.after.nodes.get(name), last_free(history, name)
        if node is not None and free is not None:
            found += node_violations(node, NodeBefore.of(free), newest.after.maintenances.values())
    return found


def handback_violations(history: History) -> list[str]:
    """In the newest step, a node is uncordoned only by a node patch that gives it back (removes the holder record) on
    behalf of the maintenance holding it, which is deleted or ended by its timeout; and a maintenance ended by its
    timeout takes no node; and a maintenance whose drain has succeeded is ended by no timeout (it stays in maintenance
    until deleted, whatever lands on its node later)."""
    newest = history[-1]
    before, after = newest.before, newest.after
    found = []
    for action in newest.of_kind(ActionKind.NODE_PATCH):
        node = before.nodes.get(action.key) or {}
        written, holder = action.holder_written
        uncordons = "unschedulable" in (action.body.get("spec") or {}) and not action.body["spec"]["unschedulable"]
        if not node.get("spec", {}).get("unschedulable") or not uncordons:
            continue
        held_by = nodes.holder_of(dict(node))
        if held_by is None:
            found.append(f"node {action.key}: uncordoned by the operator although no NodeMaintenance held it")
        elif not written or holder is not None:
            found.append(f"node {action.key}: uncordoned while NodeMaintenance {held_by} still holds it (the patch keeps its record)")
        elif action.maintenance is not None and action.maintenance != held_by:
            found.append(f"node {action.key}: given back for NodeMaintenance {action.maintenance}, but {held_by} held it")
        elif (m := after.maintenances.get(held_by) or before.maintenances.get(held_by)) is not None \
                and not deleting(m) and not status.timed_out(m.get("status") or {}):
            found.append(f"node {action.key}: given back while NodeMaintenance {held_by} is neither deleted nor ended by its timeout")
    for take in newest.takes():
        m = before.maintenances.get(take.maintenance)
        if m is not None and status.timed_out(m.get("status") or {}):
            found.append(f"node {take.node}: taken again by NodeMaintenance {take.maintenance}, which its timeout ended "
                         "(onTimeout HandBack gave the node back for good)")
        elif m is not None and _given_back_before(history, m["metadata"].get("uid")):
            found.append(f"node {take.node}: taken again by NodeMaintenance {take.maintenance}, which gave it back before "
                         "while not deleted (only its timeout does that, for good)")
    for name, m in after.maintenances.items():
        was = (before.maintenances.get(name) or {}).get("status") or {}
        now = m.get("status") or {}
        if _ended(now) and not _ended(was) and _succeeded_before(history, m["metadata"].get("uid")):
            found.append(f"NodeMaintenance {name}: its drain had succeeded, yet it turned {now.get('phase')} "
                         f"({now.get('lastError', '')}); a drained node stays in maintenance until its NodeMaintenance is deleted")
    return found


def _ended(stored: Mapping[str, Any]) -> bool:
    return status.timed_out(stored) or stored.get("phase") == status.Phase.FAILED


def _given_back_before(history: History, uid: str | None) -> bool:
    """Whether an earlier step gave a node back for the maintenance ``uid`` while it was not being deleted: its status
    may not say so (a write lost), the hand-back itself does. Asked only on a take, which is rare."""
    for st in history[:-1]:
        for action in st.of_kind(ActionKind.NODE_PATCH):
            written, holder = action.holder_written
            held_by = nodes.holder_of(dict(st.before.nodes.get(action.key) or {}))
            m = st.before.maintenances.get(held_by or "")
            if written and holder is None and m is not None and uid and m["metadata"].get("uid") == uid and not deleting(m):
                return True
    return False


def _succeeded_before(history: History, uid: str | None) -> bool:
    """Whether the maintenance ``uid`` had drained its node at some step of ``history`` (its status said so then,
    whatever it says now): asked only when it ends, which is rare, so the walk back costs little."""
    return any(status.drained_once(m.get("status") or {}) for st in history for m in st.before.maintenances.values()
               if m["metadata"].get("uid") == uid)

"""What giving a node back does, decided from the Node alone (the holder and the earlier schedulability
are recorded on it), so that an operator killed at any point still restores the node exactly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node_maintenance.coordination import remediation as rem
from node_maintenance.drain import node as nodes
from node_maintenance.drain.events import Event


@dataclass(frozen=True)
class Handback:
    """Everything a deleted NodeMaintenance does, in the executor's order: the node, the Lease, the events."""

    node_patch: dict[str, Any] | None  # None: the node is gone, or not this maintenance's
    release_lease: bool  # the node's remediation Lease is let go
    events: tuple[Event, ...]
    uncordons: bool  # the node becomes schedulable again


def hand_back(name: str, node_name: str, node: dict[str, Any] | None, coordinated: bool) -> Handback:
    """Give the node back if maintenance ``name`` holds it: remove our taint, uncordon unless it was cordoned
    before, put the remediation label back as it was, then let the Lease go (``coordinated``: Leases are held)."""
    removed = Event(False, "Normal", "RemovedMaintenance", f"maintenance of node {node_name} removed")
    if node is None or nodes.holder_of(node) != name:
        # Deleted between taking the Lease and taking the node: no other maintenance uses that Lease.
        return Handback(None, coordinated and (node is None or nodes.holder_of(node) is None), (removed,), False)
    uncordons = nodes.will_uncordon(node)
    events = (removed, Event(True, "Normal", "RemovedMaintenance", f"NodeMaintenance {name} removed"),
              *((Event(True, "Normal", "Uncordon", f"node {node_name} is schedulable again"),) if uncordons else ()))
    return Handback(rem.restore(node, nodes.end_patch(node)), coordinated, events, uncordons)

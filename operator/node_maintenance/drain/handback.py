"""What giving a node back does, decided from the Node alone (the holder and the earlier schedulability
are recorded on it), so that an operator killed at any point still restores the node exactly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node_maintenance.coordination import remediation
from node_maintenance.drain import events
from node_maintenance.drain.nodes import end_patch, fence_patch, fenced, holder_of, will_uncordon


@dataclass(frozen=True)
class Handback:
    """Everything a deleted NodeMaintenance does, in the executor's order: the node, the Lease, the events."""

    node_patch: dict[str, Any] | None  # None: the node is gone, or not this maintenance's
    release_lease: bool  # the node's remediation Lease is let go
    events: tuple[events.Event, ...]
    uncordons: bool  # the node becomes schedulable again
    fence: dict[str, Any] | None = None  # the node is not this maintenance's: it is fenced (nodes.fence_patch) before it goes
    again: bool = False  # the fence set its mark: read the node again, and clear it


def hand_back(name: str, node_name: str, node: dict[str, Any] | None, coordinated: bool) -> Handback:
    """Give the node back if maintenance ``name`` holds it: remove our taint, uncordon unless it was cordoned
    before, put the remediation label back as it was, then let the Lease go (``coordinated``: Leases are held).

    A node it does not hold may yet be taken by it: a take whose answer never came (the request timed out, or the
    operator was killed) can still be queued in the API server, and would land once the NodeMaintenance is gone. So
    the node is fenced first, its mark set then cleared, and only then is the maintenance done with it.

    The hand-back is told on the node only: the NodeMaintenance is being deleted and is gone a moment later, and an
    event on it would be one more request for each maintenance of a fleet, and one more line no `kubectl describe`
    shows. A maintenance that never held its node tells nothing: nothing happened to the node."""
    if node is not None and holder_of(node) != name:
        if not fenced(node):
            return Handback(node_patch=None, release_lease=False, events=(), uncordons=False, fence=fence_patch(node, name), again=True)
        return Handback(node_patch=None, events=(), uncordons=False, fence=fence_patch(node, name),
                        # Deleted between taking the Lease and taking the node: no other maintenance uses that Lease.
                        release_lease=coordinated and holder_of(node) is None)
    if node is None:
        return Handback(node_patch=None, release_lease=coordinated, events=(), uncordons=False)
    uncordons = will_uncordon(node)
    told = (events.Event(on_node=True, type=events.Type.NORMAL, reason="RemovedMaintenance", message=f"NodeMaintenance {name} removed"),
            *((events.Event(on_node=True, type=events.Type.NORMAL, reason="Uncordon", message=f"node {node_name} is schedulable again"),)
              if uncordons else ()))
    return Handback(node_patch=remediation.restore(node, end_patch(node)), release_lease=coordinated, events=told, uncordons=uncordons)


def unfinished(name: str, node_name: str, node: dict[str, Any] | None, coordinated: bool) -> Handback | None:
    """What is left of the hand-back of maintenance ``name`` once its status says its timeout gave the node back (the
    status is written first): the whole hand-back while the node still names it as its holder (cut short, or a restart
    or a new leader came between); None once it does not, when neither the node nor its Lease is this one's to touch."""
    return hand_back(name, node_name, node, coordinated) if node is not None and holder_of(node) == name else None

"""The etcd-quorum guard asked again before an escalated deletion on a control-plane node.

An escalation step deletes pods bypassing their budgets, so on a control-plane node it first asks the guard that let
the node be taken, with the control plane as this step reads it and the node counted as the member going
(``quorum.escalation_refusal``): while the guard refuses, no pod is deleted by escalation, eviction goes on, and the
QuorumGuard condition says why in the guard's own words.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.conditions import Condition
from node_maintenance.coordination import quorum
from node_maintenance.drain import budgets, elapsed, events, status, taking
from node_maintenance.drain.plans import Escalation, Maintenance


def due(m: Maintenance, now: datetime.datetime) -> bool:
    """Whether a step of ``m``'s ladder is due at ``now`` on a drain under way (never sooner than ``m.counted``):
    on a control-plane node the step asks the guard then, and the runtime reads the control plane for it."""
    started = m.status.get("drainStartTime")
    if not started or status.drained_once(m.status):
        return False
    return any(elapsed.seconds(timestamps.parse(started), now, m.counted) >= s.after for s in m.escalation)


def asked(m: Maintenance, taken: taking.Taken, stage: Escalation, node_pods: Iterable[dict[str, Any]],
          coverage: budgets.Coverage) -> Condition | None:
    """What the guard says of ``stage`` deleting pods on the node as taken (None: not a control-plane node, nothing to
    ask), judged on the control plane this step read (``taken.members``) and on whether the node's own guard pod is still
    among ``node_pods`` (one ``coverage`` puts under the guard budget, not being deleted); not read, it refuses: in doubt,
    nothing is deleted."""
    node, members = taken.node, taken.members
    if not quorum.is_control_plane(dict(node)):
        return None
    if members is None:
        refused: str | None = (f"node {node['metadata']['name']!r} is a control-plane node and the control-plane nodes were not "
                               "read for the etcd-quorum guard")
    else:
        here = any(quorum.guards(coverage.names(p)) and not p["metadata"].get("deletionTimestamp") for p in node_pods)
        refused = quorum.escalation_refusal(dict(node), members.control_plane, taking.held_by_others(m, members),
                                            list(members.etcd_guards), here)
    return quorum.escalation_guarded(stage.action, refused)


def told(guarded: Condition, stored: Mapping[str, Any]) -> tuple[events.Event, ...]:
    """The guard's refusal told on the NodeMaintenance once, when the status does not say it yet."""
    before: Mapping[str, Any] = next((c for c in stored.get("conditions") or [] if c.get("type") == guarded.type), {})
    if before.get("message") == guarded.message:
        return ()
    return (events.Event(on_node=False, type=events.Type.WARNING, reason=guarded.reason, message=guarded.message),)

"""Taking the node: the checks a drain step makes before it may hold its node, and what holding it takes.

A maintenance takes its node once no other maintenance holds it, the etcd-quorum guard lets a control-plane node go,
and the node's remediation Lease is not another's (claimed first when Leases are coordinated). A check that refuses
ends the step and leaves the node untouched; a maintenance that holds its node cordons and taints it again whenever
someone undid part of that. One that onTimeout HandBack ended never takes its node again.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from node_maintenance.api import conditions
from node_maintenance.coordination import quorum, remediation
from node_maintenance.drain import events, nodes, status
from node_maintenance.drain.nodes import holder_of
from node_maintenance.drain.plans import Maintenance, Plan

# A maintenance the etcd-quorum guard holds back looks again this often (control-plane nodes change rarely).
QUORUM_RECHECK_SECONDS = 10.0
# A maintenance failed because another one holds its node looks again this often (the other may be
# gone without giving the node back); every other wait ends on a change the watches report.
NODE_HELD_RECHECK_SECONDS = 15.0


@dataclass(frozen=True)
class Taken:
    """The node as this step holds it, and what holding it takes: what a drain step adds to its own decisions."""

    node: Mapping[str, Any]
    fresh: bool  # taken at this step: not held by this maintenance before
    node_patch: dict[str, Any] | None  # cordon, taint and record the holder (again); None: all in place
    events: tuple[events.Event, ...]  # BeginMaintenance, when taken at this step
    lease_claim: remediation.LeaseClaim | None  # take or renew the node's remediation Lease
    lease_seen: remediation.LeaseState | None  # what was concluded of the Lease just read
    lease_condition: conditions.Condition | None  # what is known of the Lease, as its condition in the status says it
    coordinated: bool  # Leases are held: a hand-back lets the node's go
    members: quorum.Members | None = None  # the control plane as this step read it: the guard asks it again before escalating


def take(m: Maintenance, node: Mapping[str, Any] | None, now: datetime.datetime, *, holder_exists: bool,
         lease: remediation.LeaseView | None, members: quorum.Members | None) -> Plan | Taken:
    """The node as held for this step, or the plan of a step that may not hold it (yet, or ever again): see
    ``planner.plan`` for the inputs."""
    if status.timed_out(m.status):  # handed back at its timeout: it has ended, and never takes the node again
        return Plan(phase=str(m.status.get("phase") or ""), status=dict(m.status))
    if node is None:
        return _failed(m, f"node {m.node_name!r} not found; the maintenance starts when a node of that name exists", None)
    holder = holder_of(dict(node))
    if holder and holder != m.name and holder_exists:
        return _failed(m, f"node {m.node_name!r} is already in maintenance by NodeMaintenance {holder}; "
                       f"delete this NodeMaintenance, or delete {holder} to take over", NODE_HELD_RECHECK_SECONDS)
    fresh = holder != m.name
    # What each check at takeover reads, and what holding the node takes, are gathered first, then judged in turn.
    refused = quorum_refusal(m, node, members) if fresh and members is not None else None
    patch = nodes.taken_patch(dict(node), m.name, fresh=fresh, coordinated=lease is not None, policy=m.terms.policy)
    # The Lease is held before the node is taken, and kept while it is: claimed when due, unless another holder owns it.
    lease_now = remediation.standing(lease, dict(node), now) if lease is not None else remediation.Standing()
    seen, state, claim = lease_now.seen, lease_now.state, lease_now.claim
    held = remediation.condition(state) if state is not None else None
    if refused:
        return _held_back(m, quorum.held_back(refused), QUORUM_RECHECK_SECONDS)
    if fresh and state is not None and state.other:  # just read, or known from an earlier read: either holds the node back
        return _failed(m, remediation.held_message(state.namespace, m.node_name, state.other), state.recheck_in, state)
    if fresh and m.terms.rejoin is not None:  # the checks pass now: back in the policy's queue, not yet taken
        return m.terms.rejoin
    if fresh and claim is not None:
        # Claimed, and the node taken right after in the same step unless another writer changed the Lease meanwhile (one
        # step, three requests: a slot freed is taken again without a step and two requests more). Any claim before a
        # take, a first one or one after a claim that was raced: a node is never taken on a claim that may not hold.
        claim = replace(claim, before_take=True)
    return Taken(node=node, fresh=fresh, node_patch=patch, events=_begun(m) if fresh else (),
                 lease_claim=claim, lease_seen=seen, lease_condition=held, coordinated=lease is not None, members=members)


def quorum_refusal(m: Maintenance, node: Mapping[str, Any], members: quorum.Members) -> str | None:
    """Why the etcd-quorum guard refuses ``m`` its control-plane ``node`` now (None: it allows it), counting the
    control-plane nodes other maintenances hold as gone: asked at takeover."""
    return quorum.refusal(dict(node), members.control_plane, held_by_others(m, members), list(members.etcd_guards))


def held_by_others(m: Maintenance, members: quorum.Members) -> set[str]:
    """The control-plane nodes maintenances other than ``m`` hold: the guard counts them as gone (``m``'s own node is
    judged by the rule asking)."""
    return {n["metadata"]["name"] for n in members.control_plane if holder_of(dict(n)) not in (None, m.name)}


def _begun(m: Maintenance) -> tuple[events.Event, ...]:
    """The node taken, told on the NodeMaintenance and on the node."""
    message = f"node {m.node_name} cordoned and tainted for maintenance: {m.reason}"
    return (events.Event(on_node=False, type=events.Type.NORMAL, reason="BeginMaintenance", message=message),
            events.Event(on_node=True, type=events.Type.NORMAL, reason="BeginMaintenance", message=f"{message} (NodeMaintenance {m.name})"))


def _held_back(m: Maintenance, condition: conditions.Condition, recheck: float) -> Plan:
    """Not taken, and waiting: a check made at takeover refused, ``condition`` says why; the node is untouched."""
    previous = m.status
    before: Mapping[str, Any] = next((c for c in previous.get("conditions") or [] if c.get("type") == condition.type), {})
    told = () if previous.get("phase") == status.Phase.PENDING and before.get("message") == condition.message else (
        events.Event(on_node=False, type=events.Type.WARNING, reason=condition.reason, message=condition.message),)
    refused = m.terms.conditions + ((m.terms.given_back,) if m.terms.given_back else ())
    report = status.Report(phase=status.Phase.PENDING, last_error=condition.message, waiting=condition, conditions=refused)
    return Plan(phase=status.Phase.PENDING, report=report, events=told, recheck_in=recheck, holds_node=False)


def _failed(m: Maintenance, error: str, recheck: float | None, lease: remediation.LeaseState | None = None) -> Plan:
    """Failed before taking the node: nothing drained, nothing held."""
    previous = m.status
    told = () if previous.get("phase") == status.Phase.FAILED and previous.get("lastError") == error else (
        events.Event(on_node=False, type=events.Type.WARNING, reason="FailedMaintenance", message=error),)
    # Refused by another's Lease at takeover, a maintenance under a policy gives its slot back.
    refused = m.terms.conditions + (
        (remediation.condition(lease),) + ((m.terms.given_back,) if m.terms.given_back else ()) if lease is not None else ())
    report = status.Report(phase=status.Phase.FAILED, last_error=error, conditions=refused)
    return Plan(phase=status.Phase.FAILED, report=report, events=told, recheck_in=recheck, holds_node=False, lease_seen=lease)

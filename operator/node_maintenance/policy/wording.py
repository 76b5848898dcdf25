"""What the policies' verdicts and hooks write on a NodeMaintenance, as pure functions: its Queued condition (whose
type and reasons :mod:`node_maintenance.policy.model` defines, since the decisions read one back), its PreDrain and
PostMaintenance conditions, its EscalationCapped condition, and the plan of a maintenance that waits in line without
touching its node.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.conditions import Condition
from node_maintenance.drain import bookkeeping, events, status
from node_maintenance.drain.plans import Escalation, Plan
from node_maintenance.policy import hooks
from node_maintenance.policy.model import QUEUED, MaxEscalation, QueuedReason
from node_maintenance.policy.verdicts import Verdict, VerdictKind

HOOK_CONDITIONS = {hooks.PRE_DRAIN: "PreDrain", hooks.POST_MAINTENANCE: "PostMaintenance"}
NOT_GOVERNED = Condition(type=QUEUED, status="False", reason=QueuedReason.NO_POLICY, message="no NodeMaintenancePolicy selects the node")
# The condition saying that a policy's spec.drain.maxEscalation dropped steps of the maintenance's escalation ladder.
ESCALATION_CAPPED = "EscalationCapped"
# Where a waiting maintenance's place in line is read. Not in its own status: a place moves each time one ahead is
# admitted, and a line of thousands rewriting theirs would load the API server for nothing.
_PLACE = "its place in line is in the policy's status.queue"
# A look at a window's boundary is made this long after it, so that clocks read there see it passed.
WINDOW_MARGIN_SECONDS = 0.1

# The Queued reason of each verdict kind that keeps a maintenance in line or out of it (else SlotGranted).
_QUEUED_REASONS = {
    VerdictKind.WAITING: QueuedReason.WAITING_FOR_SLOT,
    VerdictKind.CLOSED: QueuedReason.WAITING_FOR_WINDOW,
    VerdictKind.CONFLICT: QueuedReason.POLICY_CONFLICT,
    VerdictKind.UNKNOWN: QueuedReason.WAITING_FOR_POLICIES,
    VerdictKind.GIVEN_BACK: QueuedReason.SLOT_GIVEN_BACK,
}


def queued_condition(verdict: Verdict, node_name: str) -> Condition:
    """The NodeMaintenance's Queued condition."""
    reason = _QUEUED_REASONS.get(verdict.kind)
    if reason is None:
        return Condition(type=QUEUED, status="False", reason=QueuedReason.SLOT_GRANTED, message=message(verdict, node_name))
    return Condition(type=QUEUED, status="True", reason=reason, message=message(verdict, node_name))


def hook_condition(hook: str, outcome: hooks.JobOutcome) -> Condition:
    """PreDrain or PostMaintenance, from how the hook's Job stands."""
    reason = {hooks.JobState.SUCCEEDED: "JobSucceeded", hooks.JobState.FAILED: "JobFailed"}.get(outcome.state, "JobRunning")
    return Condition(type=HOOK_CONDITIONS[hook], status="True" if outcome.state == hooks.JobState.SUCCEEDED else "False", reason=reason,
                     message=outcome.message)


def escalation_capped(policy: str, cap: MaxEscalation, dropped: tuple[Escalation, ...]) -> Condition:
    """EscalationCapped: which steps of its ladder the maintenance does not follow, and the policy field that says so."""
    steps = ", ".join(f"{step.action} after {step.after}s" for step in dropped)
    return Condition(type=ESCALATION_CAPPED, status="True", reason="CappedByPolicy",
                     message=f"escalation capped at {cap} by policy {policy} (spec.drain.maxEscalation): {steps} dropped")


def escalation_uncapped(stored: Mapping[str, Any]) -> tuple[Condition, ...]:
    """A maintenance whose ladder a policy capped before, and no longer does, says so instead of still being capped."""
    capped: dict[str, Any] = next((c for c in stored.get("conditions") or [] if c.get("type") == ESCALATION_CAPPED), {})
    if capped.get("status") != "True":
        return ()
    return (Condition(type=ESCALATION_CAPPED, status="False", reason="NotCapped", message="no policy drops a step of the escalation ladder"),)


def left_line(stored: Mapping[str, Any]) -> tuple[Condition, ...]:
    """A maintenance that waited for a policy no longer selecting its node says so, instead of still waiting."""
    queued: dict[str, Any] = next((c for c in stored.get("conditions") or [] if c.get("type") == QUEUED), {})
    return (NOT_GOVERNED,) if queued.get("status") == "True" else ()


def waiting_plan(body: Mapping[str, Any], verdict: Verdict, now: datetime.datetime) -> Plan:
    """Phase Pending while the maintenance waits for a slot, for a conflict to end or for the policies to be
    readable: the node is untouched; looked at again in ``recheck_in`` (the wait may have been reworded). Its status is
    reported, and written out by the planner (``planner.plan``) as every step's is: once when it joins the line and
    when the wait's cause or wording changes, never for a move up the line, which its status does not tell.

    An event marks the start of the wait and each change of its cause, not every move up the queue."""
    previous = body.get("status") or {}
    node_name = body["spec"]["nodeName"]
    condition = queued_condition(verdict, node_name)
    before: dict[str, Any] = next((c for c in previous.get("conditions") or [] if c.get("type") == QUEUED), {})
    posted: tuple[events.Event, ...] = ()
    if previous.get("phase") != status.Phase.PENDING or before.get("reason") != condition.reason:
        posted = (events.Event(on_node=False, type=events.Type.NORMAL if verdict.kind in (VerdictKind.WAITING, VerdictKind.CLOSED) else events.Type.WARNING,
                        reason=condition.reason, message=condition.message),)
    pending = status.Report(phase=status.Phase.PENDING, last_error=condition.message if verdict.kind == VerdictKind.CONFLICT else "",
                            waiting=condition)
    # Looked at again (and a reworded wait written) at a pace the whole line can bear, and when a window opens.
    return Plan(phase=status.Phase.PENDING, events=posted, recheck_in=until(verdict.opens, now, bookkeeping.in_line_interval(verdict.queued)),
                report=pending)


def until(moment: datetime.datetime | None, now: datetime.datetime, sooner_than: float | None = None) -> float | None:
    """Seconds from ``now`` until just past ``moment`` (a window's boundary), or ``sooner_than`` if that comes first."""
    if moment is None:
        return sooner_than
    seconds = max(0.0, (moment - now).total_seconds()) + WINDOW_MARGIN_SECONDS
    return seconds if sooner_than is None else min(seconds, sooner_than)


def _next(verdict: Verdict) -> str:
    """When the next window opens, for a verdict in line for one or paused until one."""
    if verdict.why:
        return f"its windows cannot be read ({verdict.why}), so none opens until the policy is fixed"
    return f"the next opens at {timestamps.rfc3339(verdict.opens)}" if verdict.opens else "none opens again"

def message(verdict: Verdict, node_name: str) -> str:
    """What a verdict means for the maintenance of node ``node_name``, in its status's words."""
    if verdict.kind == VerdictKind.UNKNOWN:
        return (f"waiting until NodeMaintenancePolicies can be read ({verdict.why}); node {node_name} is not touched "
                "until it is known which policy governs it")
    if verdict.kind == VerdictKind.CONFLICT:
        return (f"node {node_name} is selected by more than one NodeMaintenancePolicy ({', '.join(verdict.policies)}); "
                "change their nodeSelectors so that at most one selects it")
    if verdict.kind == VerdictKind.CLOSED and verdict.policy:
        return (f"waiting for a maintenance window of NodeMaintenancePolicy {verdict.policy.name}: {_next(verdict)}; {_PLACE}; "
                "the node is not touched until then")
    if verdict.kind == VerdictKind.WAITING and verdict.policy and verdict.position:
        full = f" ({verdict.full})" if verdict.full else ""
        return (f"waiting for a slot of NodeMaintenancePolicy {verdict.policy.name}{full}: {_PLACE}; the node is not touched "
                "until then")
    if verdict.kind == VerdictKind.WAITING and verdict.policy:
        return (f"the node may be taken now: back in the queue of NodeMaintenancePolicy {verdict.policy.name}, waiting for a slot; "
                "the node is not touched until then")
    if verdict.kind == VerdictKind.GIVEN_BACK and verdict.policy:
        return (f"slot of NodeMaintenancePolicy {verdict.policy.name} given back: the node could not be taken (see the other "
                "conditions); it is looked at again, and the maintenance rejoins the queue once it may be taken")
    if verdict.kind == VerdictKind.ADMITTED and verdict.policy:
        return f"slot of NodeMaintenancePolicy {verdict.policy.name} granted"
    return "no NodeMaintenancePolicy selects the node"

def pause(verdict: Verdict, node_name: str) -> str:
    """Why a paused maintenance evicts nothing."""
    name = verdict.policy.name if verdict.policy else ""
    return (f"paused until the next maintenance window of NodeMaintenancePolicy {name} (windowEnd: Pause): no window is open "
            f"and {_next(verdict)}; no pod is evicted until then, and node {node_name} stays cordoned")

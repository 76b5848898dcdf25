"""The NodeMaintenance status a user reads: pure functions from what the drain saw to the status object.

The planner's parts say what a step's status is to say in a :class:`Report`; :func:`render` writes it out, once per
step, over the stored status, so that every status field and condition a step writes is written in one place.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.conditions import Condition, set_condition, with_conditions
from node_maintenance.drain import blocking, evicted


class Phase(enum.StrEnum):
    """status.phase: waiting to take the node, draining it, drained, or failed (before taking it, or after)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# The condition of a maintenance its timeout ended by giving the node back (spec.drain.onTimeout HandBack).
TIMED_OUT, HANDED_BACK = "TimedOut", "HandedBack"
# The reason Drained is False once the node was drained and pods bound to it later are still to leave.
LATE_PODS = "LatePods"


def timed_out(status: Mapping[str, Any]) -> bool:
    """Whether onTimeout HandBack ended this maintenance: it holds nothing and never takes its node again."""
    return any(c.get("type") == TIMED_OUT and c.get("status") == "True" for c in status.get("conditions") or [])


def drained_once(status: Mapping[str, Any]) -> bool:
    """Whether this maintenance's drain has succeeded: Succeeded, or still draining pods that came after that (Drained
    says so, whatever the phase). Its timeout and escalation ladder are then over, and pods that land later are evicted
    as any drain evicts them: a drained node is never handed back, nor a late pod deleted, by the clock."""
    return status.get("phase") == Phase.SUCCEEDED or any(
        c.get("type") == "Drained" and c.get("reason") == LATE_PODS for c in status.get("conditions") or [])


def progress(eviction_pods: int, pending: int) -> int:
    """Share of the pods to evict that are gone, 0-100; pods that arrive later can only lower it to 0."""
    if eviction_pods <= 0:
        return 100 if pending == 0 else 0
    return max(0, min(100, round(100 * (eviction_pods - pending) / eviction_pods)))


def build(
    previous: dict[str, Any],
    *,
    phase: Phase,
    total: int,
    eviction_pods: int,
    pending: list[tuple[str, str]],
    last_error: str,
    generation: int,
    now: str,
    drain_started: str | None = None,
    blocking_budgets: list[dict[str, Any]] | None = None,
    waiting: Condition | None = None,
    late: bool = False,
) -> dict[str, Any]:
    """The full status; ``pending`` holds (namespace, name) of the pods still to go.

    ``drain_started`` is when the node was taken (None while it is not); ``blocking_budgets`` lists the
    PodDisruptionBudgets holding the drain back (see ``blocking``), None while nothing is drained;
    ``waiting`` is the condition a maintenance waits on before it may take its node (a policy's queue); ``late``, that
    the drain has succeeded before and the pods still to go came after (``drained_once`` reads it back).
    """
    drained = phase == Phase.SUCCEEDED and not pending
    if waiting is not None:
        reason, message = waiting.reason, waiting.message
    elif drained:
        reason, message = "Drained", "every pod to evict has left the node"
    elif late:
        reason, message = LATE_PODS, f"the node was drained; {len(pending)} pod(s) bound to it since still to leave"
    elif phase == Phase.FAILED:
        reason, message = "MaintenanceFailed", last_error
    else:
        reason, message = "Draining", f"{len(pending)} pod(s) still to leave the node"
    # A maintenance that failed before taking its node (missing, or held by another) drained nothing.
    share = 0 if waiting is not None or (phase == Phase.FAILED and not eviction_pods) else progress(eviction_pods, len(pending))
    blocked = blocking.condition(blocking_budgets) if blocking_budgets is not None else None
    built: dict[str, Any] = {
        "phase": phase,
        "drainProgress": share,
        "totalpods": total,
        "evictionPods": eviction_pods,
        "pendingPods": [name for _, name in pending],
        "pendingPodsRefs": [{"namespace": ns, "name": name} for ns, name in pending],
        "lastError": last_error,
        "lastUpdate": now,
        "conditions": set_condition(with_conditions(previous.get("conditions") or [], (waiting,) if waiting else (), generation=generation, now=now),
                                    "Drained", "True" if drained else "False", reason, message,
                                    generation=generation, now=now),
    }
    if waiting is None:
        built["blockingBudgets"] = blocking_budgets or []
    # DrainBlocked appears once a budget held the drain back, and then says when none does any more.
    if blocked is not None and (blocking_budgets or any(c.get("type") == blocking.CONDITION for c in built["conditions"])):
        built["conditions"] = set_condition(built["conditions"], blocking.CONDITION, *blocked,
                                            generation=generation, now=now)
    if drain_started:
        built["drainStartTime"] = drain_started
    if previous.get("escalatedPods"):  # kept for good: which pods escalation deleted
        built["escalatedPods"] = previous["escalatedPods"]
    return built


@dataclass(frozen=True)
class Report:
    """What one step's status says, before it is written out over the stored one (see :func:`build` for the fields it
    shares): ``conditions`` are set after the drain's own (the policy's, the Lease's, TimedOut); ``escalated`` is
    status.escalatedPods (None: as stored); ``evicting`` the pods the drain makes leave, with the budgets covering each,
    whose workloads status.evictedWorkloads records (None: as recorded before)."""

    phase: Phase
    last_error: str = ""
    total: int = 0
    eviction_pods: int = 0
    pending: tuple[tuple[str, str], ...] = ()
    drain_started: str | None = None
    blocking_budgets: Sequence[dict[str, Any]] | None = None
    waiting: Condition | None = None
    late: bool = False
    conditions: tuple[Condition, ...] = ()
    escalated: Sequence[dict[str, Any]] | None = None
    evicting: tuple[tuple[tuple[str, ...], Mapping[str, Any]], ...] | None = None


def render(previous: Mapping[str, Any], report: Report, *, generation: int, now: datetime.datetime) -> dict[str, Any]:
    """The whole status a step writes: ``report`` over the stored ``previous``, at ``now``."""
    moment = timestamps.rfc3339(now)
    kept = previous.get("escalatedPods") if report.escalated is None else report.escalated
    built = build({**previous, "escalatedPods": list(kept or [])}, phase=report.phase, total=report.total, eviction_pods=report.eviction_pods,
                  pending=list(report.pending), last_error=report.last_error, generation=generation, now=moment,
                  drain_started=report.drain_started,
                  blocking_budgets=None if report.blocking_budgets is None else list(report.blocking_budgets),
                  waiting=report.waiting, late=report.late)
    built["conditions"] = with_conditions(built["conditions"], report.conditions, generation=generation, now=moment)
    if report.evicting is not None:  # added to what was recorded before
        going = (w for covering, pod in report.evicting for w in evicted.workloads_of(covering, pod))
        built["evictedWorkloads"] = evicted.recorded(previous.get("evictedWorkloads") or (), going)
    return built


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal but for the timestamp of the update itself, so unchanged state is not rewritten every tick."""
    return {k: v for k, v in a.items() if k != "lastUpdate"} == {k: v for k, v in b.items() if k != "lastUpdate"}


def noted(status: Mapping[str, Any], condition: Condition, *, generation: int, now: str) -> dict[str, Any] | None:
    """The status fields that record ``condition`` on a NodeMaintenance whose drain has ended (a hook's, at its
    deletion): the conditions, and lastError while it is not met; None when they say so already."""
    conditions = with_conditions(list(status.get("conditions") or []), (condition,), generation=generation, now=now)
    last_error = condition.message if condition.status != "True" else ""
    if conditions == status.get("conditions") and last_error == status.get("lastError"):
        return None
    return {"conditions": conditions, "lastError": last_error}

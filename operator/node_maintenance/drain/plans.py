"""The planner's vocabulary: what a drain step is given (:class:`Maintenance`, with the :class:`PolicyTerms` a policy
adds, and the :class:`Attempt` each earlier removal met) and what it decides (a :class:`Plan` of :class:`Removal` s).

Plain frozen values, so that every situation a drain meets is a table row in the unit tests, and the executor, the
engine, the policies and ``kubectl nm plan`` read one account of it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from node_maintenance.api.conditions import Condition
from node_maintenance.coordination.remediation import LeaseClaim, LeaseState
from node_maintenance.drain.events import Event
from node_maintenance.drain.handback import Handback
from node_maintenance.drain.rules import Rule
from node_maintenance.drain.status import Report


class Action(enum.StrEnum):
    """What a step of spec.drain.escalation does to the pods eviction has not removed; also the reason of the events
    telling each deletion."""

    DELETE_PODS = "DeletePods"  # with the pod's own grace period, or the drain's
    FORCE_DELETE_PODS = "ForceDeletePods"  # with grace period 0, those still terminating too


class OnTimeout(enum.StrEnum):
    """What spec.drain.timeoutSeconds does to a drain that has not finished."""

    FAIL = "Fail"  # the maintenance fails and keeps the node until it is deleted
    HAND_BACK = "HandBack"  # the node is given back as a deletion gives it back, and the maintenance ends


@dataclass(frozen=True)
class Escalation:
    """One step of spec.drain.escalation: from ``after`` seconds past drainStartTime, the pods eviction has not
    removed are deleted (``action``)."""

    after: int
    action: Action

    @property
    def grace(self) -> int | None:
        """ForceDeletePods deletes at once; DeletePods as the maintenance's grace says (None: the pod's own)."""
        return 0 if self.action == Action.FORCE_DELETE_PODS else None


@dataclass(frozen=True)
class PolicyTerms:
    """What the NodeMaintenancePolicy governing the node makes of one drain step (``policy.terms`` decides it); the
    default is no policy at all."""

    # Its drain rules (None: no policy, and pod annotations count for nothing), and why no pod may be evicted yet
    # (its preDrain Job, a conflict, a window's end), failed or still to come.
    rules: tuple[Rule, ...] | None = None
    policy: str | None = None  # its name, recorded on the node when the drain takes it
    hold: str = ""
    hold_failed: bool = False
    hold_recheck_in: float | None = None  # when to look again: at the hold (a hook Job's progress), or a window's end
    # The policy's conditions for this maintenance (Queued, PreDrain), and the hook Jobs it asks to create.
    conditions: tuple[Condition, ...] = ()
    jobs: tuple[Mapping[str, Any], ...] = ()
    # The condition a check at takeover records when it refuses the node (the slot goes back), and, for a
    # maintenance that gave its slot back, the plan to carry out instead of taking the node once it may.
    given_back: Condition | None = None
    rejoin: Plan | None = None
    # Not the drain's turn: the plan to carry out instead (a place in line, a conflict, the policies unknown), or
    # nothing at all until the policies have a word on this maintenance (``undecided``; looked at again in
    # ``hold_recheck_in``).
    waiting: Plan | None = None
    undecided: bool = False


@dataclass(frozen=True)
class Maintenance:
    """A NodeMaintenance as the planner reads it (its v1beta1 view)."""

    name: str
    node_name: str
    reason: str = ""
    generation: int = 1
    selector: dict[str, Any] | None = None
    grace: int | None = None
    timeout: int = 0  # seconds from drainStartTime; 0 waits forever
    on_timeout: OnTimeout = OnTimeout.FAIL
    escalation: tuple[Escalation, ...] = ()  # ascending afterSeconds
    status: Mapping[str, Any] = field(default_factory=dict)
    terms: PolicyTerms = PolicyTerms()
    # The seconds this process has counted on its monotonic clock that the drain has run (``memory.counted``): the
    # timeout and the ladder never run sooner (``elapsed.seconds``). None: it has counted nothing (a fresh process).
    counted: float | None = None

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Maintenance:
        spec = body.get("spec") or {}
        drain = spec.get("drain") or {}
        return cls(
            name=body["metadata"]["name"],
            node_name=spec["nodeName"],
            reason=spec.get("reason", ""),
            generation=body["metadata"].get("generation", 1),
            selector=drain.get("podSelector"),
            grace=drain.get("gracePeriodSeconds"),
            timeout=drain.get("timeoutSeconds") or 0,
            on_timeout=OnTimeout(drain.get("onTimeout") or OnTimeout.FAIL),
            escalation=tuple(Escalation(after=int(s["afterSeconds"]), action=Action(s["action"])) for s in drain.get("escalation") or ()),
            status=body.get("status") or {},
        )


@dataclass(frozen=True)
class Attempt:
    """What the last try to remove one pod met (keyed by pod uid)."""

    not_before: float  # epoch seconds before which the pod is not tried again
    accepted: bool = False  # the API took it; wait for the pod to terminate
    refused_by: tuple[tuple[str, str], ...] = ()  # (budget, its resourceVersion) that refused it
    error: str = ""
    failures: int = 0


@dataclass(frozen=True)
class Removal:
    """One pod to remove: evicted, or deleted (finished, or by an escalation step)."""

    namespace: str
    name: str
    uid: str
    delete: bool  # finished pods are deleted; the others evicted
    grace: int | None
    budget: str | None  # the budget this eviction counts against
    budget_version: str = ""
    escalation: Action | None = None  # the escalation step deleting it instead of an eviction (None: none)
    bypassed: tuple[str, ...] = ()  # the budgets that deletion bypasses: the one holding the pod, else all covering it


@dataclass(frozen=True)
class Plan:
    """Everything one step does, in the order the executor does it: the Lease, the node, the events, the status, then,
    once the status that records them is stored, the hand-back, the Jobs and the removals. Nothing is added to it or
    changed after ``planner.plan`` returns.

    Taking and draining the node say what the status is to say (``report``); the planner writes it out once, at the end
    (:meth:`written`), so that a plan it returns carries the whole status and no report."""

    phase: str  # a status.Phase; a step that changes nothing carries the stored one, which may be empty
    status: dict[str, Any] = field(default_factory=dict)  # the whole new status
    node_patch: dict[str, Any] | None = None
    removals: tuple[Removal, ...] = ()
    events: tuple[Event, ...] = ()
    recheck_in: float | None = None  # seconds; None: only when something changes
    holds_node: bool = False
    drained_after: float | None = None  # seconds from drain start, when this plan completes the drain
    lease_claim: LeaseClaim | None = None  # take or renew the node's remediation Lease (before the node)
    lease_seen: LeaseState | None = None  # what this plan concluded of the Lease it was shown (another holder)
    jobs: tuple[Mapping[str, Any], ...] = ()  # hook Jobs to create
    handback: Handback | None = None  # give the node back (onTimeout HandBack), as a deleted maintenance does
    report: Report | None = None  # the status still to write out (None: ``status`` is written out)

    def written(self, status: dict[str, Any]) -> Plan:
        """This plan with its report written out as ``status``."""
        return Plan(phase=self.phase, status=status, node_patch=self.node_patch, removals=self.removals, events=self.events,
                    recheck_in=self.recheck_in, holds_node=self.holds_node, drained_after=self.drained_after, lease_claim=self.lease_claim,
                    lease_seen=self.lease_seen, jobs=self.jobs, handback=self.handback)

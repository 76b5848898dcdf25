"""What one step of a drain engine decides from, and the decision: a frozen snapshot in, a plan out.

The engine (``runtime.engine``) reads a :class:`Reading` (every await happens there), and :func:`plan` turns it into the
step's :class:`~node_maintenance.drain.plans.Plan` without I/O, so that a step's decision is a function of what it read.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from node_maintenance.coordination import quorum, remediation
from node_maintenance.drain import budgets, handback, planner
from node_maintenance.drain.plans import Attempt, Maintenance, Plan
from node_maintenance.drain.podindex import PodIndex


@dataclass(frozen=True)
class Reading:
    """Everything one step decides from."""

    body: dict[str, Any]  # the NodeMaintenance in v1beta1, its stored status merged in
    foreign: bool  # someone else wrote the status it shows
    now: datetime.datetime
    monotonic: float  # the event loop's clock when ``now`` was read: a drain's time is counted on it (``memory.seen``)
    maintenance: Maintenance | None  # the planner's view (None: handed back at its timeout, it has ended)
    node: dict[str, Any] | None
    live: frozenset[str] | None = None  # the uids of the node's pods, for a drain step
    waits: bool = False  # in line: the policies' waiting plan is carried out instead of a drain
    pods: PodIndex | None = None
    disruption_budgets: list[dict[str, Any]] = field(default_factory=list)  # of the pods' namespaces
    coverage: budgets.Coverage | None = None
    lease: remediation.LeaseView | None = None
    members: quorum.Members | None = None
    daemonsets: Mapping[str, bool] = field(default_factory=dict)
    in_flight: Mapping[str, budgets.InFlight] = field(default_factory=dict)
    attempts: Mapping[str, Attempt] = field(default_factory=dict)  # what the last removals met
    holder_exists: bool = False
    taking: bool = False  # a drain step for a node no other maintenance holds
    coordinated: bool = False  # Leases are held: a hand-back lets the node's go (read for an ended maintenance)


def plan(reading: Reading) -> Plan:
    """The step's plan: the ended status written again with what is left of the hand-back it records, or the planner's
    (the policies' waiting plan, or the drain's: a maintenance in line has no pods read)."""
    m = reading.maintenance
    if m is None:
        left = handback.unfinished(reading.body["metadata"]["name"], reading.body["spec"]["nodeName"], reading.node, reading.coordinated)
        return Plan(phase=str(reading.body["status"].get("phase") or ""), status=dict(reading.body["status"]), handback=left)
    return planner.plan(m, reading.node, reading.pods if reading.pods is not None else [], reading.disruption_budgets, reading.now, holder_exists=reading.holder_exists,
                        daemonsets=reading.daemonsets, attempts=reading.attempts, in_flight=reading.in_flight, lease=reading.lease,
                        members=reading.members, coverage=reading.coverage)

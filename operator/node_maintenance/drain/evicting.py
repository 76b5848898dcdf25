"""Which pods eviction removes at one step of a drain, paced by their budgets and the drain rules.

Pacing: a pod under a PodDisruptionBudget is evicted only while the budget allows another disruption
(less the evictions already sent to it), and a pod the budget refused waits until the budget changes;
one held back only by evictions in flight is looked at again when they stop counting, should the
budget's change never be seen (an answer lost on the way).
Pods without a budget go at once; refused or failed ones are tried again at their attempt's time.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from node_maintenance.drain import budgets, rules
from node_maintenance.drain.plans import Attempt, Maintenance, Removal
from node_maintenance.drain.podindex import Facts


@dataclass
class Step:
    """What eviction does at one step: the pods it removes, those a budget holds, their errors, when to look again."""

    removals: list[Removal] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # pod ref -> budget holding it
    held: set[str] = field(default_factory=set)  # uids of the pods the drain rules hold (a later order, WaitCompleted, misannotated)
    errors: dict[str, str] = field(default_factory=dict)  # pod ref -> last error
    recheck_in: float | None = None

    def wake_in(self, seconds: float) -> None:
        self.recheck_in = seconds if self.recheck_in is None else min(self.recheck_in, seconds)

    def text(self) -> str:
        parts = [f"{pod} waits on PodDisruptionBudget {budget}" for pod, budget in sorted(self.blocked.items())]
        parts += [f"{pod}: {error}" for pod, error in sorted(self.errors.items())]
        return "; ".join(parts)


def removals(m: Maintenance, to_go: list[Facts], coverage: budgets.Coverage, now: datetime.datetime,
             attempts: Mapping[str, Attempt], in_flight: Mapping[str, budgets.InFlight]) -> Step:
    """The pods eviction (or, for finished ones, deletion) removes now, paced by their budgets and the drain rules."""
    step = Step()
    # What the drain rules and the budgets say of each pod, read before the pods are gone through.
    held = rules.held((f.pod, f.treatment) for f in to_go if f.treatment is not None) if m.terms.rules is not None else {}
    paced = {f.uid for f in to_go if not f.finished and len(f.budgets) == 1 and not budgets.passes(f.asks, coverage.budgets[f.budgets[0]])}
    clock = now.timestamp()
    left: dict[str, int] = {}
    for pod in to_go:
        attempt = attempts.get(pod.uid)
        if pod.uid in held:  # a later order, or a pod left to complete by itself; terminating too: no ladder hastens it
            step.held.add(pod.uid)
            if held[pod.uid] and not pod.leaving:
                step.errors[pod.ref] = held[pod.uid]
            continue
        if pod.leaving:
            continue  # on its way out
        if attempt and attempt.accepted and attempt.not_before > clock:
            step.wake_in(attempt.not_before - clock)  # accepted: the watch shows it terminating soon
            continue
        if pod.uid in paced:  # its one budget paces it
            name = pod.budgets[0]
            budget = coverage.budgets[name]
            version = budget["metadata"].get("resourceVersion", "")
            flight = in_flight.get(name)
            if name not in left:
                left[name] = _allowed(budget) - (flight.count if flight else 0)
            refused_here = attempt is not None and (name, version) in attempt.refused_by
            if left[name] > 0 and not refused_here:
                left[name] -= 1
                step.removals.append(_removal(m, pod, name, version))
            else:
                step.blocked[pod.ref] = name  # tried again when the budget changes
                if flight:
                    step.wake_in(flight.expires_in)
            continue
        if attempt and attempt.not_before > clock:
            step.wake_in(attempt.not_before - clock)
            if attempt.error:
                step.errors[pod.ref] = attempt.error
            continue
        step.removals.append(_removal(m, pod, None))
    return step


def _allowed(budget: dict[str, Any]) -> int:
    """Disruptions the budget allows now; none until the disruption controller has processed it."""
    observed = budget.get("status") or {}
    if observed.get("observedGeneration", -1) < budget["metadata"].get("generation", 0):
        return 0
    return int(observed.get("disruptionsAllowed") or 0)


def _removal(m: Maintenance, pod: Facts, budget: str | None, version: str = "") -> Removal:
    meta = pod.pod["metadata"]
    return Removal(namespace=meta["namespace"], name=meta["name"], uid=pod.uid, delete=pod.finished, grace=m.grace, budget=budget,
                   budget_version=version)

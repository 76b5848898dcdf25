"""The ready pods a PodDisruptionBudget covers never drop below what it demands, whatever the operator does.

Holds at every instant: the soak checks it against a real cluster, the simulation after every step (a drain removes
pods by eviction, which the budget paces, until an escalation step deletes them past it on purpose).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from node_maintenance.api.objects import key_of
from node_maintenance.drain import budgets
from simulation.holding import deleting


def healthy(pod: Mapping[str, Any]) -> bool:
    """Counted by the disruption controller: ready and not on its way out."""
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])
    return ready and not deleting(pod)


def _scaled(value: int | str, total: int) -> int:
    """intstr: an integer as is, a percentage of ``total`` rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def desired_healthy(budget: Mapping[str, Any]) -> int | None:
    """The fewest healthy pods ``budget`` allows, from its spec and the pods it expects; None before it counted any."""
    expected: int | None = (budget.get("status") or {}).get("expectedPods")
    if not expected:
        return None
    spec = budget.get("spec") or {}
    if spec.get("minAvailable") is not None:
        return _scaled(spec["minAvailable"], expected)
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - _scaled(spec["maxUnavailable"], expected))
    return None


def covers(budget: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the budget selects the pod (policy/v1's rule, as the drain reads it)."""
    return budgets.covers(dict(budget), dict(pod))


def pdb_violations(budget_list: Iterable[Mapping[str, Any]], pod_list: Iterable[Mapping[str, Any]]) -> list[str]:
    """Budgets whose healthy pods are fewer than they demand."""
    pod_list = list(pod_list)
    found = []
    for budget in budget_list:
        desired = desired_healthy(budget)
        if desired is None:
            continue
        count = sum(1 for p in pod_list if covers(budget, p) and healthy(p))
        if count < desired:
            found.append(f"PodDisruptionBudget {key_of(budget)}: {count} healthy pod(s), it demands {desired}")
    return found

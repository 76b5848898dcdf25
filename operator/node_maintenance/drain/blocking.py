"""Why a drain is stuck, as the NodeMaintenance status tells it: the PodDisruptionBudgets holding it back.

Each budget that keeps a pod on the node is named with its counts and whether the block is
*structural* (it can never allow the eviction until an admin changes the budget or the workload) or
*temporary* (waiting helps). The classification is ``budgets``' (the one ``kubectl nm plan`` shows),
fed with the node's pods: the disruption controller's own counts come from the budget's status.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Set
from typing import Any

from node_maintenance.drain import budgets

CONDITION = "DrainBlocked"


class Reason(enum.StrEnum):
    """The DrainBlocked condition's reason."""

    DEADLOCK = "PodDisruptionBudgetDeadlock"  # a structural block: an admin must act (the event's reason too)
    TEMPORARY = "PodDisruptionBudgetTemporary"  # waiting helps
    NOT_BLOCKED = "NotBlocked"


class Kind(enum.StrEnum):
    """A blockingBudgets entry's ``block``: what ``budgets.Block`` says, as the status shows it."""

    STRUCTURAL = "Structural"
    TEMPORARY = "Temporary"


def blocking(analysis: budgets.Analysis, held: Mapping[str, str], coverage: budgets.Coverage,
             moving: Set[str] = frozenset()) -> list[dict[str, Any]]:
    """The status entries of the budgets holding the drain back, by namespace/name.

    ``analysis`` is the budgets' of the node's pods still to go that no removal was sent for in this step, ``coverage``
    holds the budgets of the pods' namespaces; ``held`` maps the pods the drain waits on a budget for (namespace/name)
    to that budget. A budget in ``moving`` has an eviction under way: it paces the drain, it does not block it (unless
    it is structural, which no eviction under way changes).
    """
    found: dict[str, tuple[budgets.Blocker, set[str]]] = {}
    for ref, blockers in analysis.blockers.items():
        for blocker in blockers:
            for name in blocker.budgets:
                kept = found.setdefault(name, (blocker, set()))
                if blocker.block is budgets.Block.STRUCTURAL and kept[0].block is not budgets.Block.STRUCTURAL:
                    kept = found[name] = (blocker, kept[1])
                kept[1].add(ref)
    for ref, name in held.items():
        if name not in found:  # refused its last eviction, or evictions already sent use up what it allows
            refusing = f"PodDisruptionBudget {name} refuses evictions for now; the drain tries again when it changes"
            found[name] = (budgets.Blocker(budgets=(name,), block=budgets.Block.TEMPORARY, reason=refusing), set())
        found[name][1].add(ref)
    by_name = coverage.budgets
    return [_entry(by_name[name], blocker, sorted(refs)) for name, (blocker, refs) in sorted(found.items())
            if name in by_name and (name not in moving or blocker.block is budgets.Block.STRUCTURAL)]


def _entry(budget: dict[str, Any], blocker: budgets.Blocker, refs: list[str]) -> dict[str, Any]:
    status = budget.get("status") or {}
    return {
        "namespace": budget["metadata"]["namespace"],
        "name": budget["metadata"]["name"],
        "disruptionsAllowed": int(status.get("disruptionsAllowed") or 0),
        "currentHealthy": int(status.get("currentHealthy") or 0),
        "desiredHealthy": int(status.get("desiredHealthy") or 0),
        "expectedPods": int(status.get("expectedPods") or 0),
        "block": Kind.STRUCTURAL if blocker.block is budgets.Block.STRUCTURAL else Kind.TEMPORARY,
        "message": blocker.reason,
        "blockedPods": len(refs),
    }


def condition(entries: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(status, reason, message) of the DrainBlocked condition."""
    if not entries:
        return "False", Reason.NOT_BLOCKED, "no PodDisruptionBudget holds the drain back"
    structural = [e for e in entries if e["block"] == Kind.STRUCTURAL]
    shown = structural or entries
    return "True", Reason.DEADLOCK if structural else Reason.TEMPORARY, "; ".join(e["message"] for e in shown)


def new_deadlocks(previous: Iterable[dict[str, Any]], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The structural blocks in ``entries`` that the previous status did not show as structural."""
    before = {(e.get("namespace"), e.get("name")) for e in previous if e.get("block") == Kind.STRUCTURAL}
    return [e for e in entries if e["block"] == Kind.STRUCTURAL and (e["namespace"], e["name"]) not in before]

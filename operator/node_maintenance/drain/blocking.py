"""Why a drain is stuck, as the NodeMaintenance status tells it: the PodDisruptionBudgets holding it back.

Each budget that keeps a pod on the node is named with its counts and whether the block is
*structural* (it can never allow the eviction until an admin changes the budget or the workload) or
*temporary* (waiting helps). The classification is ``budgets``' (the one ``kubectl nm plan`` shows),
fed with the node's pods: the disruption controller's own counts come from the budget's status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from node_maintenance.drain import budgets as pdbs
from node_maintenance.drain.podindex import Facts, PodIndex

CONDITION = "DrainBlocked"
DEADLOCK = "PodDisruptionBudgetDeadlock"  # the condition's reason, and the event's, for a structural block
TEMPORARY = "PodDisruptionBudgetTemporary"
STRUCTURAL_BLOCK, TEMPORARY_BLOCK = "Structural", "Temporary"


def blocking(waiting: list[Facts], held: Mapping[str, str], coverage: pdbs.Coverage,
             index: PodIndex, moving: AbstractSet[str] = frozenset()) -> list[dict[str, Any]]:
    """The status entries of the budgets holding ``waiting`` back, by namespace/name.

    ``coverage`` holds the budgets of the pods' namespaces, ``index`` the node's pods. ``waiting`` are the node's pods
    still to go that no removal was sent for in this step; ``held``
    maps the pods the drain waits on a budget for (namespace/name) to that budget. A budget in
    ``moving`` has an eviction under way: it paces the drain, it does not block it (unless it is
    structural, which no eviction under way changes).
    """
    analysis = pdbs.assess(waiting, coverage, index.selected)
    found: dict[str, tuple[pdbs.Blocker, set[str]]] = {}
    for ref, blockers in analysis.blockers.items():
        for blocker in blockers:
            for name in blocker.budgets:
                kept = found.setdefault(name, (blocker, set()))
                if blocker.block is pdbs.Block.STRUCTURAL and kept[0].block is not pdbs.Block.STRUCTURAL:
                    kept = found[name] = (blocker, kept[1])
                kept[1].add(ref)
    for ref, name in held.items():
        if name not in found:  # refused its last eviction, or evictions already sent use up what it allows
            found[name] = (pdbs.Blocker((name,), pdbs.Block.TEMPORARY,
                                        f"PodDisruptionBudget {name} refuses evictions for now; the drain tries again when it changes"), set())
        found[name][1].add(ref)
    by_name = coverage.budgets
    return [_entry(by_name[name], blocker, sorted(refs)) for name, (blocker, refs) in sorted(found.items())
            if name in by_name and (name not in moving or blocker.block is pdbs.Block.STRUCTURAL)]


def _entry(budget: dict[str, Any], blocker: pdbs.Blocker, refs: list[str]) -> dict[str, Any]:
    status = budget.get("status") or {}
    return {
        "namespace": budget["metadata"]["namespace"],
        "name": budget["metadata"]["name"],
        "disruptionsAllowed": int(status.get("disruptionsAllowed") or 0),
        "currentHealthy": int(status.get("currentHealthy") or 0),
        "desiredHealthy": int(status.get("desiredHealthy") or 0),
        "expectedPods": int(status.get("expectedPods") or 0),
        "block": STRUCTURAL_BLOCK if blocker.block is pdbs.Block.STRUCTURAL else TEMPORARY_BLOCK,
        "message": blocker.reason,
        "blockedPods": len(refs),
    }


def condition(entries: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(status, reason, message) of the DrainBlocked condition."""
    if not entries:
        return "False", "NotBlocked", "no PodDisruptionBudget holds the drain back"
    structural = [e for e in entries if e["block"] == STRUCTURAL_BLOCK]
    shown = structural or entries
    return "True", DEADLOCK if structural else TEMPORARY, "; ".join(e["message"] for e in shown)


def new_deadlocks(previous: Iterable[dict[str, Any]], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The structural blocks in ``entries`` that the previous status did not show as structural."""
    before = {(e.get("namespace"), e.get("name")) for e in previous if e.get("block") == STRUCTURAL_BLOCK}
    return [e for e in entries if e["block"] == STRUCTURAL_BLOCK and (e["namespace"], e["name"]) not in before]


def waiting_pods(to_go: list[Facts], going: set[str]) -> list[Facts]:
    """The pods still to go that ask a budget, less those on their way out and ``going`` (uids whose
    removal was sent or accepted); a pod under two budgets is never evicted, so it always waits."""
    return [f for f in to_go if not (f.leaving or f.finished)
            and (len(f.budgets) > 1 or (len(f.budgets) == 1 and f.uid not in going))]

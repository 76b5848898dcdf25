"""A NodeMaintenancePolicy's own status, as pure functions of its summary: its counts, its line, its windows, and the
conditions that tell its author what to fix (a node selected twice, a hook borrowing the operator's identity, a hook
naming no namespace or the operator's, a window that cannot be read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node_maintenance.api import conditions, timestamps
from node_maintenance.policy.verdicts import Summary

BORROWED_IDENTITY = "BorrowedIdentity"  # a policy's condition: a hook template names the operator's ServiceAccount
MISPLACED_HOOKS = "MisplacedHooks"  # a policy's condition: a hook names no namespace, or the operator's, to run its Job in
INVALID_WINDOWS = "InvalidWindows"  # a policy's condition: a window cannot be read, so none opens


def policy_status(previous: Mapping[str, Any], summary: Summary, generation: int, now: str) -> dict[str, Any]:
    """The policy's status; None values remove a field (a limit that became unlimited)."""
    if summary.conflicts:
        listing = "; ".join(f"node {node} is selected by {', '.join(names)}" for node, names in summary.conflicts)
        conflict = conditions.Condition(type="Conflict", status="True", reason="NodeSelectedTwice",
                                        message=f"{listing}; their maintenances wait until only one NodeMaintenancePolicy selects each node")
    else:
        conflict = conditions.Condition(type="Conflict", status="False", reason="NoConflict",
                                        message="no selected node is selected by another NodeMaintenancePolicy")
    if summary.borrowed:
        identity = conditions.Condition(type=BORROWED_IDENTITY, status="True", reason="OperatorServiceAccount",
                                        message=f"{'; '.join(summary.borrowed)}; until then that hook fails without running its Job "
                                                "and the maintenances needing it hold")
    else:
        identity = conditions.Condition(type=BORROWED_IDENTITY, status="False", reason="OwnServiceAccounts",
                                        message="no hook Job template names the operator's ServiceAccount")
    if summary.misplaced:
        placement = conditions.Condition(type=MISPLACED_HOOKS, status="True", reason="NoNamespaceOfTheirOwn",
                                         message=f"{'; '.join(summary.misplaced)}; until then that hook fails without running its Job "
                                                 "and the maintenances needing it hold")
    else:
        placement = conditions.Condition(type=MISPLACED_HOOKS, status="False", reason="OwnNamespaces",
                                         message="every hook Job runs in a namespace its policy names, not the operator's")
    if summary.invalid_windows:
        windows = conditions.Condition(type=INVALID_WINDOWS, status="True", reason="UnreadableWindow",
                                       message=f"{'; '.join(summary.invalid_windows)}; until then no window opens and no queued "
                                               "maintenance takes a node")
    else:
        windows = conditions.Condition(type=INVALID_WINDOWS, status="False", reason="WindowsRead", message="every maintenance window can be read")
    window = summary.window
    return {
        "observedGeneration": generation,
        "selectedNodes": summary.selected,
        "maxParallel": summary.max_parallel,
        "maxUnavailable": summary.max_unavailable,
        "inMaintenance": summary.in_maintenance,
        "unavailable": summary.unavailable,
        "queued": len(summary.queue),
        "queue": list(summary.queue),
        "conflicts": [{"node": node, "policies": list(names)} for node, names in summary.conflicts],
        "windowOpen": window is None or window.open,
        "nextWindow": timestamps.rfc3339(window.next_opens) if window and window.next_opens else None,
        "windowCloses": timestamps.rfc3339(window.closes) if window and window.closes else None,
        "conditions": conditions.with_conditions(list(previous.get("conditions") or []), (conflict, identity, placement, windows),
                                                 generation=generation, now=now),
    }


def same_status(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` would change nothing of the ``stored`` status: a field set to None is one left out."""
    return {k: v for k, v in stored.items() if v is not None} == {k: v for k, v in new.items() if v is not None}

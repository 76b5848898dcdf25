"""What a drain of one node would do, decided by the operator's own rules (pods.classify, budgets.analyse).

``build`` is pure: it takes what the cluster holds and returns the plan document that
``kubectl nm plan`` prints as a table, JSON or YAML.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.objects import key_of
from node_maintenance.drain import budgets, pods
from node_maintenance.drain.budgets import Block
from node_maintenance.drain.planner import escalations
from node_maintenance.drain.plans import PolicyTerms
from node_maintenance.policy import model, terms

WHY_STAY = {
    pods.Action.KEEP_DAEMONSET: "managed by a DaemonSet, which would recreate it on the node (kubectl drain --ignore-daemonsets)",
    pods.Action.KEEP_UNKNOWN_DAEMONSET: "managed by a DaemonSet that could not be read: it stays until the DaemonSet can be "
                                        "read (kubectl drain refuses the node)",
    pods.Action.KEEP_MIRROR: "a static (mirror) pod: it belongs to the kubelet, the API cannot remove it",
    pods.Action.KEEP_UNSELECTED: "outside the pod selector: the drain neither touches nor waits for it",
}
WHY_GO = {
    pods.Action.DELETE_FINISHED: "finished: deleted without an eviction, no budget is asked",
    pods.Action.EVICT: "evicted through the Eviction API",
}


def build(
    node: str,
    node_pods: list[dict[str, Any]],
    pdbs: list[dict[str, Any]],
    namespace_pods: list[dict[str, Any]],
    selector: dict[str, Any] | None = None,
    holder: str | None = None,
    daemonsets: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """The plan for draining ``node``; ``pdbs`` and ``namespace_pods`` cover the namespaces of its pods, ``daemonsets``
    says whether the DaemonSets they name exist (as ``pods.classify`` reads it)."""
    actions = {key_of(p): pods.classify(p, selector, daemonsets) for p in node_pods}
    evicting = [p for p in node_pods if actions[key_of(p)] is pods.Action.EVICT]
    coverage = budgets.Coverage(pdbs)
    analysis = budgets.analyse(evicting, pdbs, namespace_pods, coverage)
    rows = []
    for pod in sorted(node_pods, key=key_of):
        ref = key_of(pod)
        action = actions[ref]
        pod_blockers = analysis.blockers.get(ref, [])
        rows.append({
            "namespace": pod["metadata"]["namespace"],
            "name": pod["metadata"]["name"],
            "action": "evict" if action is pods.Action.EVICT else "delete" if action is pods.Action.DELETE_FINISHED else "stay",
            "rule": action.value,
            "why": WHY_STAY.get(action) or WHY_GO[action],
            "budgets": list(coverage.names(pod)) if action is pods.Action.EVICT else [],
            "blockedBy": [_blocker(b) for b in pod_blockers],
        })
    blockers: list[dict[str, Any]] = [
        {"budgets": [a.name], "kind": a.blocker.block.value, "reason": a.blocker.reason,
         "disruptionsAllowed": a.disruptions_allowed, "pods": list(a.pods)}
        for a in analysis.budgets if a.blocker
    ]
    # A pod under several budgets is refused whatever each allows: one blocker per such pod.
    blockers += [
        {**b, "disruptionsAllowed": None, "pods": [f"{r['namespace']}/{r['name']}"]}
        for r in rows for b in r["blockedBy"] if len(b["budgets"]) > 1
    ]
    return {
        "node": node,
        "podSelector": selector,
        "inMaintenanceBy": holder,
        "pods": rows,
        "blockers": blockers,
        "summary": {
            "evict": sum(r["action"] == "evict" for r in rows),
            "delete": sum(r["action"] == "delete" for r in rows),
            "stay": sum(r["action"] == "stay" for r in rows),
            "blockedStructurally": sum(_held(r, Block.STRUCTURAL) for r in rows),
            "blockedTemporarily": sum(_held(r, Block.TEMPORARY) and not _held(r, Block.STRUCTURAL) for r in rows),
        },
        # False when some pod can never leave without an admin: the drain would not finish.
        "drainable": not any(_held(r, Block.STRUCTURAL) for r in rows),
    }


def governing(node: Mapping[str, Any], policies: Iterable[Mapping[str, Any]]) -> model.Policy | None:
    """The NodeMaintenancePolicy whose defaults, rules and escalation cap a drain of ``node`` follows: the one that
    governs it (none, or more than one, which hold the drain until resolved: none)."""
    parsed = [model.Policy.of(p) for p in policies]
    names = model.governing(parsed, node)
    selecting = [p for p in parsed if p.name in names]
    return selecting[0] if len(selecting) == 1 else None


def escalation(maintenance: Mapping[str, Any], node_pods: list[dict[str, Any]], pdbs: list[dict[str, Any]],
               daemonsets: Mapping[str, bool] | None, now: datetime.datetime, *, policy: model.Policy | None = None) -> list[dict[str, Any]]:
    """Which pods each escalation step of ``maintenance`` (a NodeMaintenance, or one a drain would be) would delete, and
    when: at drainStartTime + afterSeconds once the drain has started (``at``; None before), were the pods and budgets to
    stay as they are ``now``, under ``policy`` (the one governing the node: its drain defaults, its rules, its
    maxEscalation cap). The operator's planner decides it (``planner.escalations``)."""
    m = terms.governed(maintenance, policy, PolicyTerms(rules=policy.rules) if policy else PolicyTerms())
    started = m.status.get("drainStartTime")
    ladder = escalations(m, node_pods, pdbs, timestamps.parse(started) if started else now, daemonsets=daemonsets)
    return [{"action": stage.action.value, "afterSeconds": stage.after, "at": timestamps.rfc3339(at) if started else None,
             "pods": [{"namespace": r.namespace, "name": r.name, "gracePeriodSeconds": r.grace, "budget": ", ".join(r.bypassed) or None} for r in chosen]}
            for stage, at, chosen in ladder]


def _held(row: dict[str, Any], block: Block) -> bool:
    return any(b["kind"] == block.value for b in row["blockedBy"])


def _blocker(blocker: budgets.Blocker) -> dict[str, Any]:
    return {"budgets": list(blocker.budgets), "kind": blocker.block.value, "reason": blocker.reason}

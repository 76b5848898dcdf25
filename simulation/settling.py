"""Once the faults stop and the operator has had time to catch up, every maintenance that can finish has finished, and
every one that waits says why.

:func:`settled_violations` is the soak's form, over the objects a real cluster lists, for a workload no policy paces:
every NodeMaintenance has drained its node, and none that was deleted is kept by a finalizer. :func:`settled` judges the
end of a simulated history, where policies may keep maintenances waiting in line: a wait is fine when its status says
why and its policy has no room for it. :func:`at_rest` tells when a history may stop settling early: there is nothing left to
wait for.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from node_maintenance.api.objects import key_of
from node_maintenance.drain import nodes, pods, rules, status
from node_maintenance.policy import model
from simulation import counting
from simulation.history import STEP_SECONDS, History, State
from simulation.holding import deleting


def _left_on(node_name: str, pod_list: Iterable[Mapping[str, Any]], kept: Iterable[rules.Rule] = ()) -> list[str]:
    """The pods a drain of the node waits for that are still there: not those the drain rules ``kept`` (its policy's)
    or their own annotation leave on the node (Skip, or a misspelt value, which protects)."""
    kept = tuple(kept)
    return sorted(key_of(p) for p in pod_list if (p.get("spec") or {}).get("nodeName") == node_name
                  and pods.must_go(dict(p)) and not deleting(p)
                  and rules.treatment(p, kept).behavior not in (rules.Behavior.SKIP, rules.Behavior.INVALID))


def settled_violations(node_list: Iterable[Mapping[str, Any]], maintenances: Iterable[Mapping[str, Any]],
                       pod_list: Iterable[Mapping[str, Any]]) -> list[str]:
    """Once the operator caught up: no deleted NodeMaintenance left, each other one Succeeded on a drained node."""
    pod_list = list(pod_list)
    known = {n["metadata"]["name"] for n in node_list}
    found = []
    for m in maintenances:
        name, node_name = m["metadata"]["name"], m["spec"].get("nodeName")
        if deleting(m):
            found.append(f"NodeMaintenance {name}: deleted but still kept by finalizers {m['metadata'].get('finalizers')}")
            continue
        if node_name not in known:
            continue  # a maintenance of a missing node waits for it, by design
        phase = (m.get("status") or {}).get("phase")
        if phase != status.Phase.SUCCEEDED:
            found.append(f"NodeMaintenance {name}: {phase or 'no phase'}, not Succeeded ({(m.get('status') or {}).get('lastError', '')})")
        if left := _left_on(node_name, pod_list):
            found.append(f"NodeMaintenance {name}: node {node_name} not drained, {', '.join(left)} still there")
    return found


def settled(history: History, quiet_since: datetime.datetime) -> list[str]:
    """The end of ``history``, faults over since ``quiet_since``: nothing deleted is left, no node is held by a
    maintenance that is gone, each maintenance that Succeeded holds its drained node, one its timeout ended holds
    nothing, and each other one states why it waits (lastError, or a Queued condition) and waits for a slot only while
    its policy has no room for it."""
    end = history[-1].after
    quiet = f"{(end.at - quiet_since).total_seconds():.0f}s after the last fault"
    found = [f"node {name}: still held by NodeMaintenance {nodes.holder_of(dict(n))}, which is gone, {quiet}"
             for name, n in sorted(end.nodes.items()) if nodes.holder_of(dict(n)) and not end.holder(name)]
    for name, m in sorted(end.maintenances.items()):
        node_name = m["spec"].get("nodeName")
        stored = m.get("status") or {}
        if deleting(m):
            found.append(f"NodeMaintenance {name}: deleted but still kept by finalizers {m['metadata'].get('finalizers')}, {quiet}")
        elif node_name not in end.nodes:
            continue  # a maintenance of a missing node waits for it, by design
        elif status.timed_out(stored):
            if end.holder(node_name) == name:
                found.append(f"NodeMaintenance {name}: ended by its timeout but still holds node {node_name}, {quiet}")
        elif stored.get("phase") == status.Phase.SUCCEEDED:
            governing = set(counting.governed_by(end, node_name))
            kept = [rule for policy in counting.policies(end) if policy.name in governing for rule in policy.rules]
            if left := _left_on(node_name, end.pods.values(), kept):
                found.append(f"NodeMaintenance {name}: Succeeded but node {node_name} not drained, {', '.join(left)} still there, {quiet}")
        else:
            found += _waiting(end, name, m, quiet)
    return found


def _waiting(end: State, name: str, m: Mapping[str, Any], quiet: str) -> list[str]:
    """A maintenance not Succeeded: it says why, and a wait for a slot is for one its policy has not got. Room is room for
    any node, one that adds to maxUnavailable too: the first in line that does not fit keeps the later ones waiting,
    even one whose node is already unavailable."""
    node_name = m["spec"]["nodeName"]
    stored = m.get("status") or {}
    queued = next((c for c in stored.get("conditions") or () if c.get("type") == model.QUEUED and c.get("status") == "True"), None)
    phase = stored.get("phase") or "no phase"
    if not stored.get("lastError") and not (queued and queued.get("message")):
        return [f"NodeMaintenance {name}: {phase} on node {node_name} without saying why (no lastError, no Queued condition), {quiet}"]
    if queued is None or queued.get("reason") != model.QueuedReason.WAITING_FOR_SLOT or end.holder(node_name):
        return []
    governing = set(counting.governed_by(end, node_name))
    return [f"NodeMaintenance {name}: waits for a slot of NodeMaintenancePolicy {policy.name}, which has room for node {node_name}, {quiet}"
            for policy in counting.policies(end) if policy.name in governing
            and all(scope.room("") for scope in counting.scopes(end, policy, node_name))]


# Longer than the longest any recheck of the operator's waits for a maintenance that has finished (its backoff's cap, a
# Forbidden lease's recheck: 60 s) and than a quiet watch lasts before it is opened again (90 s), so that a history at
# rest that long has nothing left to come.
QUIET_SECONDS = 120.0


def at_rest(history: History, quiet_seconds: float = QUIET_SECONDS) -> bool:
    """Whether the history has come to rest: every maintenance has finished (Succeeded on its drained node, or ended by
    its timeout), none is being deleted, no node is held by one that is gone, no policy waits for a recovering node, and
    nothing the promises read has changed for ``quiet_seconds``. Settling longer would only repeat its last state, so the
    search ends it there, and spends its time on histories instead (the full settling time is for one still moving)."""
    steps = int(quiet_seconds / STEP_SECONDS)
    if len(history) < steps:
        return False
    first, end = history[-steps].before, history[-1].after
    if any(getattr(first, kind) != getattr(end, kind) for kind in ("nodes", "pods", "budgets", "maintenances", "policies")):
        return False
    if any(counting.recovering(end, name) for name in end.policies):
        return False
    finished = (status.timed_out(m.get("status") or {}) or (m.get("status") or {}).get("phase") == status.Phase.SUCCEEDED
                for m in end.maintenances.values())
    return all(finished) and not any(deleting(m) for m in end.maintenances.values()) and not settled(history, end.at)

"""A node given back under waitForHealthy keeps its slot, listed in its policy's status.recovering, until the workloads
evicted from it are healthy again or waitForHealthySeconds have passed since it was given back. The entry is written
before the hand-back; while a NodeMaintenance still holds the node, nothing ends it, and the cap counts from the
hand-back, in steps (the operator counts it on its monotonic clock from when it sees the node given back).

Whether a workload is healthy is the operator's documented definition (``policy.health.unhealthy``: a budget's
currentHealthy reaching expectedPods, a ReplicaSet's or StatefulSet's replicas all available, a deleted budget not
healthy); when an entry may leave the list is decided here, from the state after the step and the simulated clock. An
entry also goes with its policy, or when the policy stops waiting for health.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.drain.evicted import Kind, Workload
from node_maintenance.policy import health, model
from simulation import counting
from simulation.history import ActionKind, History, State, Step


def recovery_violations(history: History) -> list[str]:
    """The recovering entries the newest step dropped before their workloads were healthy or their cap had passed."""
    newest = history[-1]
    found = []
    for name, body in sorted(newest.before.policies.items()):
        after = newest.after.policies.get(name)
        if after is None or not (body.get("status") or {}).get("recovering") or not (policy := model.Policy.of(after)).wait_for_healthy:
            continue
        cap = policy.wait_for_healthy_seconds
        kept = {e["node"] for e in (after.get("status") or {}).get("recovering") or ()}
        for entry in (body.get("status") or {}).get("recovering") or ():
            if entry["node"] in kept:
                continue
            # Held throughout the step, its hand-back not done: a node given back and taken again within the step may
            # have been judged healthy in between.
            holder = newest.after.holder(entry["node"])
            if holder and newest.before.holder(entry["node"]) and entry["node"] not in newest.gives_back():
                found.append(f"node {entry['node']} dropped from NodeMaintenancePolicy {name}'s status.recovering while "
                             f"NodeMaintenance {holder} still holds it: its wait begins when it is given back")
                continue
            waited = _waited(history, entry)
            workloads = [_workload(w) for w in entry.get("workloads") or ()]
            unhealthy = [why for w in workloads if (why := health.unhealthy(w, workload_object(newest.after, w)))]
            if unhealthy and not _was_healthy(history, name, entry["node"], workloads) and waited < cap:
                found.append(f"node {entry['node']} dropped from NodeMaintenancePolicy {name}'s status.recovering after {waited:.0f}s "
                             f"of its {cap}s (waitForHealthySeconds) while {'; '.join(unhealthy)}")
    return found


def unlisted_violations(history: History) -> list[str]:
    """The nodes the newest step gave back under a policy waiting for health without listing them in its
    status.recovering: the entry is written before the hand-back, a deletion's and onTimeout HandBack's alike, so that
    the node keeps its slot. Judged only where the operator surely knew that the policy governed the node and waited for
    health: as the step before ended (what its watch had brought, a policy deleted moments ago included), as the step
    began and, for waitForHealthy, as it ended too (switched off meanwhile, the entry is dropped as soon as it is made);
    and one policy throughout: a policy replaced around the hand-back had the entry written to the object of the name
    that existed then (listed as the step before ended counts too)."""
    newest = history[-1]
    given_back = newest.gives_back()
    if len(history) < 2 or newest.started or not given_back:
        return []
    then = counting.policies_known(history)  # dear to count: only for a step that gave a node back
    found = []
    for node in given_back:
        for name in counting.governed_by(then, node):
            bodies = [state.policies.get(name) for state in (then, newest.before, newest.after)]
            waiting = all(body is not None and model.Policy.of(body).wait_for_healthy for body in bodies)
            one = len({str(((body or {}).get("metadata") or {}).get("uid", "")) for body in bodies}) == 1
            if waiting and one and name in counting.governed_by(newest.before, node) and not _listed(newest, name, node) \
                    and node not in counting.recovering(then, name):
                found.append(f"node {node} given back by NodeMaintenance {newest.before.holder(node)} under NodeMaintenancePolicy "
                             f"{name}, which waits for health, without being listed in its status.recovering: its slot was freed at once")
    return found


def _listed(step: Step, policy: str, node: str) -> bool:
    """Whether the policy's status listed the node as recovering at the step's start or end, or a write of it within."""
    written = (((a.body or {}).get("status") or {}).get("recovering") or () for a in step.of_kind(ActionKind.POLICY_STATUS_WRITE) if a.key == policy)
    return (node in counting.recovering(step.before, policy) or node in counting.recovering(step.after, policy)
            or any(entry.get("node") == node for entries in written for entry in entries))


def _was_healthy(history: History, policy: str, node: str, workloads: list[Workload]) -> bool:
    """Whether every workload was healthy at once, at some step's start or end, from the step that gave the node back on
    and while the status listed it: the recovery ends the first time they are, and the drop may have been judged then
    (within the step that gave it back, after the hand-back, the workloads perhaps still as at its start) and written
    a round later (a pod leaving since is news to a recovery already ended)."""
    for st in reversed(history):
        if any(not any(health.unhealthy(w, workload_object(state, w)) for w in workloads) for state in (st.before, st.after)):
            return True
        if node in st.gives_back() or node not in counting.recovering(st.before, policy):
            return False
    return False


def _waited(history: History, entry: Mapping[str, Any]) -> float:
    """Seconds since the entry's node was given back, by the end of the newest step: the steps' own time since the start
    of the one that gave it back (the wall clock jumps between steps). A node whose hand-back the history does not show
    (its holder's record left behind, the holder deleted by hand) waited since the entry's ``since``, on the latest wall
    clock seen: the drop may have been decided before the clock was set back (the status written a step later)."""
    waited = 0.0
    for st in reversed(history):
        waited += st.seconds()
        if entry["node"] in st.gives_back():
            return waited
    return (max(st.after.at for st in history) - timestamps.parse(entry["since"])).total_seconds()


def _workload(entry: Mapping[str, Any]) -> Workload:
    return str(entry["kind"]), str(entry["namespace"]), str(entry["name"])


def workload_object(state: State, workload: Workload) -> Mapping[str, Any] | None:
    """The workload as the state holds it, None when it does not exist."""
    kind, namespace, name = workload
    by_kind: dict[str, Mapping[str, Mapping[str, Any]]] = {
        Kind.BUDGET: state.budgets, Kind.REPLICA_SET: state.replicasets, Kind.STATEFUL_SET: state.statefulsets}
    return by_kind.get(kind, {}).get(f"{namespace}/{name}")

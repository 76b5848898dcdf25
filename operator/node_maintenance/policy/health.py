"""Health-aware pacing (a policy's waitForHealthy), as pure functions: whether the workloads evicted from a node
given back are healthy again, so that its slot may go to the next maintenance.

A node given back under waitForHealthy stays in its policy's ``status.recovering`` (written before the node is
given back, so a restart keeps it) and holds a slot until every workload evicted from it is healthy, or until
waitForHealthySeconds have passed since it was given back. When in doubt it holds: a workload whose status has not
been read (its watch has not listed, or fails) counts as not healthy yet, and so do a deleted budget and a ReplicaSet
scaled to zero, since nothing recorded tells how the evicted pods' replacements stand.

The wait begins when the node is given back, not when its entry is written: a hand-back that fails for a while (the
API refusing, a lost lease) would otherwise spend the cap before the node is back, and an entry judged healthy before
the hand-back says nothing of the workloads after it. So while a NodeMaintenance still holds the node, its entry waits,
uncapped, for the hand-back. From the hand-back on, the wait has lasted the smaller of what the wall clock says since
``since`` and what the operator has counted on its monotonic clock since it first saw the node given back
(``counted``): a wall clock set forward ends no wait sooner, and an operator that starts counts anew (in doubt, each
start may hold a slot up to one more cap).
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.drain.evicted import Kind, Workload

DEFAULT_WAIT_SECONDS = 600  # spec.waitForHealthySeconds when absent
HEALTHY, WAITING, GAVE_UP = "Healthy", "Waiting", "GaveUp"
NOT_GIVEN_BACK = "its hand-back, a NodeMaintenance still holding the node"  # what a held node's entry waits for

@dataclass(frozen=True)
class Judgement:
    node: str
    state: str  # HEALTHY, WAITING or GAVE_UP
    waiting_for: tuple[str, ...] = ()  # what is not healthy yet (or, once GAVE_UP, what was not)
    expires_in: float | None = None  # seconds until the cap passes, while WAITING for a node given back


def unhealthy(workload: Workload, obj: Mapping[str, Any] | None) -> str:
    """Why the workload is not healthy yet, "" when it is. A ReplicaSet or StatefulSet that is gone leaves nothing to
    wait for. A budget that is gone, and a ReplicaSet scaled to zero (a rollout's new ReplicaSet may hold the evicted
    pods' replacements), tell nothing of those replacements, and nothing recorded names what to judge them by instead
    (a drain records a budget's pods by their budget only, and a Deployment's pods by their ReplicaSet): in doubt, they
    are not healthy, and the slot is held until waitForHealthySeconds."""
    kind, namespace, name = workload
    ref = f"{kind} {namespace}/{name}"
    if obj is None:
        return f"{ref}: deleted, and what owns the pods it covered is not recorded" if kind == Kind.BUDGET else ""
    meta, status = obj["metadata"], obj.get("status") or {}
    if status.get("observedGeneration", -1) < meta.get("generation", 0):
        return f"{ref}: its controller has not observed its latest change yet"
    if kind == Kind.BUDGET:  # every pod it expects, not only as many as it requires: those the drain evicted are back
        healthy, expected = int(status.get("currentHealthy") or 0), int(status.get("expectedPods") or 0)
        return "" if healthy >= expected else f"{ref}: {healthy} of {expected} healthy"
    available, wanted = int(status.get("availableReplicas") or 0), int((obj.get("spec") or {}).get("replicas", 1))
    if kind == Kind.REPLICA_SET and wanted == 0:
        return f"{ref}: scaled to zero (a rollout may have replaced it), and its Deployment is not recorded"
    return "" if available >= wanted else f"{ref}: {available} of {wanted} available"


def judge(entry: Mapping[str, Any], objects: Mapping[Workload, Mapping[str, Any] | None], unknown: Mapping[str, str],
          cap_seconds: int, now: datetime.datetime, counted: float | None) -> Judgement:
    """How one ``status.recovering`` entry stands. ``objects``: each workload as watched (None: it does not exist);
    ``unknown``: for each kind whose watch has not listed or fails, why; such a workload counts as not healthy;
    ``counted``: the seconds the operator has counted since it first saw the node given back, None while a
    NodeMaintenance still holds it (the wait has not begun)."""
    workloads: list[Workload] = [(w["kind"], w["namespace"], w["name"]) for w in entry.get("workloads") or ()]
    reasons = [] if counted is not None else [NOT_GIVEN_BACK]
    for workload in workloads:
        kind, namespace, name = workload
        if kind in unknown:
            reasons.append(f"{kind} {namespace}/{name}: unknown, {unknown[kind]}")
        elif why := unhealthy(workload, objects.get(workload)):
            reasons.append(why)
    if not reasons:
        return Judgement(entry["node"], HEALTHY)
    if counted is None:
        return Judgement(entry["node"], WAITING, tuple(reasons))
    left = cap_seconds - min(counted, (now - timestamps.parse(entry["since"])).total_seconds())
    if left <= 0:
        return Judgement(entry["node"], GAVE_UP, tuple(reasons))
    return Judgement(entry["node"], WAITING, tuple(reasons), left)


def entry(node: str, workloads: Iterable[Mapping[str, Any]], now: datetime.datetime) -> dict[str, Any]:
    """A node given back now: its ``status.recovering`` entry, waiting for the workloads evicted from it, each once."""
    named = {(w["kind"], w["namespace"], w["name"]): None for w in workloads}
    return {"node": node, "since": timestamps.rfc3339(now), "waitingFor": [],
            "workloads": [{"kind": kind, "namespace": namespace, "name": name} for kind, namespace, name in named]}


def listed(status: Mapping[str, Any]) -> set[str]:
    """The nodes a policy's status lists as recovering."""
    return {e["node"] for e in status.get("recovering") or ()}


def key(entry: Mapping[str, Any]) -> tuple[str, str]:
    """What names a recovering entry across judgements: its node and ``since`` (a node given back again gets a new one)."""
    return entry["node"], entry["since"]


def gave_up_message(judgement: Judgement, cap_seconds: int) -> str:
    return (f"gave up waiting after {cap_seconds}s (waitForHealthySeconds) for the workloads evicted from node {judgement.node}: "
            f"{'; '.join(judgement.waiting_for)}; its slot is free again")


CONDITION = "Recovering"


def status(entries: Iterable[Mapping[str, Any]], judgements: Mapping[str, Judgement], gave_up: str,
           previous: Mapping[str, Any]) -> tuple[list[dict[str, Any]], tuple[str, str, str]]:
    """The policy's ``status.recovering`` (the entries still waiting, each naming what it waits for) and its
    Recovering condition (status, reason, message): True while a node's slot waits, else why not (a wait given up
    stays said until another starts)."""
    waiting = [{**e, "waitingFor": list(judgements[e["node"]].waiting_for)} for e in entries
               if e["node"] in judgements and judgements[e["node"]].state == WAITING]
    if waiting:
        listing = "; ".join(f"node {e['node']} waits for {', '.join(e['waitingFor'])}" for e in waiting)
        return waiting, ("True", "WaitingForHealthy", f"{listing}; each keeps its slot until then (waitForHealthy)")
    if gave_up or previous.get("reason") == "GaveUp":
        return waiting, ("False", "GaveUp", gave_up or previous.get("message", ""))
    return waiting, ("False", "Healthy", "the workloads evicted from every node given back are healthy again")


@dataclass(frozen=True)
class Recovery:
    """Every recovering node judged at one moment, by policy."""

    judged: Mapping[str, Mapping[str, Judgement]]  # policy -> node -> how it stands
    recovering: Mapping[str, list[str]]  # policy -> the nodes that keep their slot: waiting, or listed in its status still
    gave_up: Mapping[str, str]  # policy -> why a wait was given up by this judgement (it was not before)
    expires_in: float | None  # seconds until the soonest cap passes, while a node waits
    awaited: frozenset[tuple[str, str]]  # (kind, "namespace/name") of every workload a recovering node waits for


def judge_all(caps: Mapping[str, int | None], entries: Mapping[str, Iterable[Mapping[str, Any]]],
              objects: Mapping[Workload, Mapping[str, Any] | None], unknown: Mapping[str, str],
              before: Mapping[str, Mapping[str, Judgement]], now: datetime.datetime,
              counted: Mapping[tuple[str, str], float], listed: Mapping[str, Collection[str]]) -> Recovery:
    """Judge every policy's recovering nodes. ``caps``: every policy's waitForHealthySeconds, None for one that does not
    wait for health (its entries are dropped); ``entries``: each policy's recovering entries; ``objects``: each workload
    they name as watched; ``before``: the last judgement, to tell a wait given up now from one given up earlier;
    ``counted``: by entry (its node and ``since``), the seconds counted since its node was first seen given back (an
    entry whose node is still held is absent); ``listed``: the nodes each policy's status lists as recovering now, which
    keep their slot until a status that drops them is written (taken sooner, the slot would count twice to one reading
    that status, an operator restarted meanwhile among them)."""
    judged: dict[str, dict[str, Judgement]] = {}
    gave_up: dict[str, str] = {}
    soonest: float | None = None
    awaited: set[tuple[str, str]] = set()
    for policy, cap in caps.items():
        judged[policy] = {}
        for e in entries.get(policy, ()) if cap is not None else ():
            judgement = judged[policy][e["node"]] = judge(e, objects, unknown, cap or 0, now, counted.get(key(e)))
            earlier = before.get(policy, {}).get(e["node"])
            if judgement.state == GAVE_UP and (earlier is None or earlier.state != GAVE_UP):
                gave_up[policy] = gave_up_message(judgement, cap or 0)
            if judgement.state == WAITING and judgement.expires_in is not None:
                soonest = judgement.expires_in if soonest is None else min(soonest, judgement.expires_in)
            if judgement.state == WAITING:
                awaited |= {(w["kind"], f"{w['namespace']}/{w['name']}") for w in e.get("workloads") or ()}
    recovering = {policy: sorted({*(node for node, j in nodes.items() if j.state == WAITING), *listed.get(policy, ())})
                  for policy, nodes in judged.items()}
    return Recovery(judged, recovering, gave_up, soonest, frozenset(awaited))

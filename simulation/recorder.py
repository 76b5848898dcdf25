"""The history of a run, as the invariants read it: the cluster's state taken from the simulated API, and the writes
the operator made in between turned into :class:`~simulation.history.Action` values."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from node_maintenance.api.paths import BUDGETS, PODS, nm_path, node_path, policy_path
from simulation.apiserver import SimulatedApi, Write
from simulation.history import Action, ActionKind, State
from simulation.locations import locate


def state(api: SimulatedApi) -> State:
    policies, pods = locate(policy_path()), locate(PODS)
    taken = State.of(api.clock(), api.revision, nodes=api.kept(node_path()), pods=api.kept(PODS), budgets=api.kept(BUDGETS),
                     maintenances=api.kept(nm_path()), policies=api.kept(policy_path()),
                     departed=[obj for where, obj in api.removed.items() if policies.holds(where)])
    return replace(taken, pod_removals={f"{where.namespace}/{where.name}": int(obj["metadata"]["resourceVersion"])
                                        for where, obj in api.removed.items() if pods.holds(where)})


def actions(writes: Iterable[Write], before: State) -> tuple[Action, ...]:
    """The writes the API applied, as actions; ``before`` names the maintenance a removal was done for (the holder of
    the pod's node), unless it was sent in an earlier step and carried out late (the judge reads its holder then)."""
    found = []
    for write in writes:
        if not write.applied:
            continue
        where = locate(write.path)
        body = write.body if isinstance(write.body, dict) else {}
        key = f"{where.namespace}/{where.name}" if where.namespace else where.name
        kind = _kind(write.method, where.resource, where.subresource)
        if kind is None:
            continue
        if kind in (ActionKind.EVICTION, ActionKind.POD_DELETE):
            pod = before.pods.get(key) or {}
            holder = None if write.sent else before.holder(str((pod.get("spec") or {}).get("nodeName") or ""))
            options = body.get("deleteOptions") if kind is ActionKind.EVICTION else body
            grace = (options or {}).get("gracePeriodSeconds")
            found.append(Action(kind=kind, key=key, body=body, grace=grace, maintenance=holder, revision=write.revision,
                                sent=write.sent))
            continue
        found.append(Action(kind=kind, key=key, body=body, revision=write.revision, sent=write.sent))  # whom a node patch was for, the API does not see
    return tuple(found)


def _kind(method: str, resource: str, subresource: str) -> ActionKind | None:
    table = {("PATCH", "nodes", ""): ActionKind.NODE_PATCH, ("POST", "pods", "eviction"): ActionKind.EVICTION,
             ("DELETE", "pods", ""): ActionKind.POD_DELETE, ("PATCH", "nodemaintenances", "status"): ActionKind.STATUS_WRITE,
             ("PATCH", "nodemaintenances", ""): ActionKind.MAINTENANCE_PATCH,
             ("PATCH", "nodemaintenancepolicies", "status"): ActionKind.POLICY_STATUS_WRITE, ("POST", "jobs", ""): ActionKind.JOB_CREATE}
    if resource == "leases":
        return ActionKind.LEASE_WRITE
    return table.get((method, resource, subresource))

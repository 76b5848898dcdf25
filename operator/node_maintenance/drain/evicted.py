"""What a drain records of the pods it makes leave the node: the workloads whose health a policy's waitForHealthy
waits for once the node is given back (``status.evictedWorkloads``). Every drain records them, under a policy or none:
the node may be relabelled into a pool that waits for health while the drain runs."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any


class Kind(enum.StrEnum):
    """What a pod's eviction is judged by once its node is given back."""

    BUDGET = "PodDisruptionBudget"
    REPLICA_SET = "ReplicaSet"
    STATEFUL_SET = "StatefulSet"


Workload = tuple[str, str, str]  # (kind: a Kind, namespace, name)


def workloads_of(budgets: Iterable[str], pod: Mapping[str, Any]) -> list[Workload]:
    """What a pod's eviction is judged by once its node is given back: the budgets covering it ("namespace/name"),
    else the ReplicaSet or StatefulSet owning it (a Deployment's pods are its ReplicaSet's: the ReplicaSet is
    available when its replicas are); nothing for a pod neither covers."""
    namespace = pod["metadata"]["namespace"]
    covering: list[Workload] = [(Kind.BUDGET, ns, name) for ns, name in (budget.split("/", 1) for budget in budgets)]
    if covering:
        return covering
    owner = next((o for o in pod["metadata"].get("ownerReferences") or () if o.get("controller")), None)
    if owner is not None and owner.get("kind") in (Kind.REPLICA_SET, Kind.STATEFUL_SET):
        return [(Kind(owner["kind"]), namespace, owner["name"])]
    return []


def recorded(previous: Iterable[Mapping[str, Any]], workloads: Iterable[Workload]) -> list[dict[str, str]]:
    """The status's evictedWorkloads: those recorded before and ``workloads``, each once, sorted."""
    every = {(w["kind"], w["namespace"], w["name"]) for w in previous} | set(workloads)
    return [{"kind": kind, "namespace": ns, "name": name} for kind, ns, name in sorted(every)]

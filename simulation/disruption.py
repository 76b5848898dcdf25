"""PodDisruptionBudgets as the cluster keeps them: the disruption controller's status, and the Eviction API's check.

The simulated API server evicts as the real one does (``pkg/registry/core/pod/storage/eviction.go``): a terminal pod
goes at once; a pod two budgets cover is refused with a server error; an unhealthy pod goes while its budget is
met (``IfHealthyBudget``, the default) or always (``AlwaysAllow``); otherwise the budget must allow a disruption,
which the eviction uses up until the controller counts again. The controller (:func:`budget_status`) runs when the
simulation says, so a drain can meet a budget whose status lags behind its pods, as in a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from simulation.budgets import covers, desired_healthy, healthy


def terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def budget_status(budget: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], scale_of: Callable[[Mapping[str, Any]], int | None]) -> dict[str, Any]:
    """The status the disruption controller writes: the pods a budget covers counted now. The pods it expects are its
    pods' controllers' scales added up (``scale_of`` a pod's controller's, None for a pod without one, which counts
    itself), so a pod evicted and its replacement count once; pods disrupted and not gone yet count as unhealthy."""
    disrupted = (budget.get("status") or {}).get("disruptedPods") or {}
    covered = [p for p in pods if covers(budget, p) and not terminal(p)]
    still_disrupted = {p["metadata"]["name"]: disrupted[p["metadata"]["name"]] for p in covered
                       if p["metadata"]["name"] in disrupted and not p["metadata"].get("deletionTimestamp")}
    current = sum(1 for p in covered if healthy(p) and p["metadata"]["name"] not in still_disrupted)
    controllers: dict[str, int] = {}
    for pod in covered:
        scale = scale_of(pod)
        controllers[_controller(pod) if scale is not None else pod["metadata"]["name"]] = 1 if scale is None else scale
    expected = sum(controllers.values())
    desired = desired_healthy({"spec": budget.get("spec") or {}, "status": {"expectedPods": expected}}) or 0
    return {"observedGeneration": budget["metadata"].get("generation", 1), "expectedPods": expected, "currentHealthy": current,
            "desiredHealthy": desired, "disruptionsAllowed": max(0, current - desired), "disruptedPods": still_disrupted,
            "conditions": [{"type": "DisruptionAllowed", "status": "True" if current > desired else "False",
                            "reason": "SufficientPods" if current > desired else "InsufficientPods"}]}


def _controller(pod: Mapping[str, Any]) -> str:
    owner: Mapping[str, Any] = next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), {})
    return f"{owner.get('kind')}/{owner.get('name')}"


def refusal(pod: Mapping[str, Any], budgets: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """Why the Eviction API refuses ``pod`` under the ``budgets`` covering it (status code and message), or None
    when it may go; the caller then uses up one disruption of the one budget (if any)."""
    if terminal(pod) or not budgets:
        return None
    if len(budgets) > 1:
        return 500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    budget = budgets[0]
    status = budget.get("status") or {}
    policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
    if not healthy(pod) and (policy == "AlwaysAllow" or status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0)):
        return None
    if status.get("observedGeneration", 0) < budget["metadata"].get("generation", 1):
        return 429, "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget is still being processed by the server."
    if status.get("disruptionsAllowed", 0) <= 0:
        return 429, (f"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget "
                     f"{budget['metadata']['name']} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                     f"{status.get('currentHealthy', 0)} currently")
    return None

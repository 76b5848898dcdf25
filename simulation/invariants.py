"""Every promise of the operator checked on the newest step of a history: what the simulation calls after each step.

Each check is a pure function of the history so far, judging what the newest step's actions did (the operator's doing,
not a fault's), and returns sentences an admin would read:

1. limits (:mod:`simulation.limits`): a take never puts more of a policy's nodes in maintenance, or unavailable, than
   its maxParallel, maxUnavailable and topology limits allow;
2. removals (:mod:`simulation.removals`): a drain never removes a pod its rules keep, a mirror or DaemonSet pod, and
   deletes past budgets only when its escalation ladder says so; nor does an eviction leave a budget short
   (:mod:`simulation.budgets`);
3. holding (:mod:`simulation.holding`): a node is uncordoned only by its holder's hand-back, stays cordoned and tainted
   while held, is as it was once given back, and a maintenance its timeout ended never takes it again;
4. turns (:mod:`simulation.turns`): a take happens only while a window is open, ahead of no older maintenance waiting;
5. recovery (:mod:`simulation.recovery`): a node given back under waitForHealthy is listed as recovering when given
   back, and keeps its slot until its workloads are healthy or the cap passes.

Liveness, the sixth, is judged once at the end of a history: :func:`simulation.settling.settled`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simulation import budgets, holding, limits, recovery, removals, turns
from simulation.history import ActionKind, History

CHECKS: tuple[Callable[[History], list[str]], ...] = (
    limits.limit_violations,
    removals.removal_violations,
    holding.handback_violations,
    holding.patched_violations,
    turns.turn_violations,
    recovery.recovery_violations,
    recovery.unlisted_violations,
)


def budget_violations(history: History) -> list[str]:
    """The budgets covering a healthy pod the newest step evicted (one not Ready counts for nothing, and the Eviction API
    lets it go while the budget is met), left with fewer healthy pods than they demanded when the
    eviction was asked. The Eviction API judges by the budget's status as its controller last counted it, which the
    history shows at the step's start and end only: each budget is judged by the smaller of the two demands. A
    workload scaled up meanwhile demands more of pods not Ready yet (Kubernetes' own lag, not the drain's doing), and
    one scaled down within the step was counted again before the eviction came (its budget then demanded less; a
    scale-down after the eviction within the same step is excused alike, the API's own refusal being the check). A pod
    deleted past its budgets counts as still there: that deletion bypassed them on purpose (the removals judge whether
    its ladder step had come), and the evictions are judged by what they took. So does one an operator deleted before
    it was restarted, while the budget's count (as the newest step began) predates that deletion: the Eviction API
    judged the restarted operator's eviction by that count, and nothing told that operator of the deletion. The same
    operator that deleted it counts it against the budget itself (``runtime.budget_watch``): no excuse then."""
    newest = history[-1]
    evicted = [pod for a in newest.of_kind(ActionKind.EVICTION) if (pod := newest.before.pods.get(a.key)) is not None and budgets.healthy(pod)]
    found = []
    for key, before in newest.before.budgets.items():
        if not any(budgets.covers(before, pod) for pod in evicted):
            continue
        touched = min((before, *_counted(newest.after.budgets.get(key))), key=lambda one: budgets.desired_healthy(one) or 0)
        bypassed = _bypassed(history, int(before["metadata"].get("resourceVersion") or 0))
        found += budgets.pdb_violations([touched], {**newest.after.pods, **bypassed}.values())
    return found


def _bypassed(history: History, counted_at: int) -> dict[str, Mapping[str, Any]]:
    """The pods deleted past their budgets, as they were before: those the newest step deleted, and those an operator
    deleted before the newest restart and after the budget's count at ``counted_at`` (a deletion the operator made as
    it was killed, and the eviction the restarted one sent moments later, both fall between two counts)."""
    found: dict[str, Mapping[str, Any]] = {}
    restarted = False  # a restart came after the step looked at (within the newest step, or at its start)
    for st in reversed(history):
        newest = st is history[-1]
        if not newest and st.after.revision <= counted_at:
            break
        if newest or restarted:
            for action in st.of_kind(ActionKind.POD_DELETE):
                if (newest or action.revision > counted_at) and (pod := st.before.pods.get(action.key)) is not None:
                    found.setdefault(action.key, pod)
        restarted = restarted or st.started
    return found


def _counted(budget: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], ...]:
    """The budget as the step left it, if its controller has counted it: one that has not (recreated within the step)
    tells nothing of the demand the eviction met. One counted with no pod expected (its workload scaled to none within
    the step) demanded nothing when it was counted, and the Eviction API judged by that. As the step began, one that had
    counted none demanded nothing, and the Eviction API judged by that (a workload scaled from none within the step)."""
    return (budget,) if budget is not None and (budget.get("status") or {}).get("expectedPods") is not None else ()


def violations(history: History) -> list[str]:
    """What the newest step of ``history`` broke, by every check (empty: every promise holds)."""
    if not history:
        return []
    return [found for check in (*CHECKS, budget_violations) for found in check(history)]

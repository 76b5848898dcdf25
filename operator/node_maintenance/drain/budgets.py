"""Which PodDisruptionBudgets hold a drain back, and whether waiting can ever help.

A budget that refuses an eviction is either *structural*: it can never allow it until an admin
changes the budget or the workload (``maxUnavailable: 0``, ``minAvailable`` at or above the pods
that exist, a pod under two budgets), or *temporary*: it refuses now but allows evictions once
unhealthy pods recover, a rollout ends or evicted pods' replacements become healthy.

Pure functions over policy/v1 PodDisruptionBudget and Pod dicts (as the API returns them), following
the Eviction API and the disruption controller, so ``kubectl nm plan`` and tests share one account.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from node_maintenance.api.objects import key_of
from node_maintenance.drain import pods


@dataclass(frozen=True)
class InFlight:
    """Evictions sent against one budget that its status does not count yet."""

    count: int
    expires_in: float  # seconds until the oldest stops counting, should its event never come


class Block(enum.Enum):
    STRUCTURAL = "structural"  # never satisfiable without an admin
    TEMPORARY = "temporary"  # satisfiable by waiting


@dataclass(frozen=True)
class Blocker:
    """One reason an eviction of a pod will be refused, and whether waiting helps."""

    budgets: tuple[str, ...]  # namespace/name of the budget(s) refusing
    block: Block
    reason: str


@dataclass(frozen=True)
class Assessment:
    """One budget seen against the pods a drain of one node would evict."""

    name: str  # namespace/name
    disruptions_allowed: int
    pods: tuple[str, ...]  # namespace/name of the node's pods whose eviction asks this budget
    blocker: Blocker | None


@dataclass(frozen=True)
class Analysis:
    budgets: tuple[Assessment, ...]
    blockers: dict[str, list[Blocker]] = field(default_factory=dict)  # pod ref -> what holds it


def covers(budget: dict[str, Any], pod: dict[str, Any]) -> bool:
    """policy/v1: a budget selects pods of its namespace; no selector selects none, an empty one all."""
    selector = (budget.get("spec") or {}).get("selector")
    return (
        selector is not None
        and budget["metadata"].get("namespace") == pod["metadata"].get("namespace")
        and pods.matches_selector(pod["metadata"].get("labels") or {}, selector)
    )


class _Selectors:
    """The budgets' selectors by namespace, and which of them each label set met so far."""

    def __init__(self, budgets: list[dict[str, Any]], signature: tuple[tuple[str, str], ...]) -> None:
        self.signature = signature
        self.by_namespace: dict[str, list[dict[str, Any]]] = {}
        for budget in sorted(budgets, key=key_of):
            if (budget.get("spec") or {}).get("selector") is not None:
                self.by_namespace.setdefault(budget["metadata"].get("namespace", ""), []).append(budget)
        self.seen: dict[tuple[str, frozenset[tuple[str, str]]], tuple[str, ...]] = {}


def _signature(budgets: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key_of(b), repr((b.get("spec") or {}).get("selector"))) for b in budgets))


class Coverage:
    """Which budgets select each pod, over the budgets as they are now.

    A drain step asks this for every pod of its node, several times; matching each pod against each budget
    every time made it the operator's hottest code. So which budgets a label set meets is worked out once per
    namespace and label set, and kept for as long as the budgets' selectors stay the same (:meth:`over` a later
    listing); their status, which changes with every eviction, plays no part in it.
    """

    def __init__(self, budgets: list[dict[str, Any]], _kept: _Selectors | None = None) -> None:
        self.budgets = {key_of(b): b for b in budgets}
        signature = _signature(budgets)
        self._selectors = _kept if _kept is not None and _kept.signature == signature else _Selectors(budgets, signature)

    @property
    def signature(self) -> tuple[tuple[str, str], ...]:
        """The budgets' names and selectors: what decides which budgets select a pod."""
        return self._selectors.signature

    def over(self, budgets: list[dict[str, Any]]) -> Coverage:
        """The coverage of ``budgets`` (a later listing), keeping what was worked out while the selectors are the same."""
        return Coverage(budgets, self._selectors)

    def names(self, pod: dict[str, Any]) -> tuple[str, ...]:
        """The budgets selecting ``pod``, by namespace/name, sorted."""
        meta = pod["metadata"]
        namespace = meta.get("namespace") or ""
        candidates = self._selectors.by_namespace.get(namespace)
        if not candidates:
            return ()
        labels = meta.get("labels") or {}
        seen_key = (namespace, frozenset(labels.items()))
        found = self._selectors.seen.get(seen_key)
        if found is None:
            found = self._selectors.seen[seen_key] = tuple(key_of(b) for b in candidates if covers(b, pod))
        return found

    def selected(self, budget: dict[str, Any], namespace_pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The pods of ``namespace_pods`` that ``budget`` (one of these budgets) selects."""
        name = key_of(budget)
        return [p for p in namespace_pods if name in self.names(p)]

    def grouped(self, namespace_pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """The pods of ``namespace_pods`` each budget selects, by namespace/name, in one pass."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for pod in namespace_pods:
            for name in self.names(pod):
                groups.setdefault(name, []).append(pod)
        return groups


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _observed(budget: dict[str, Any]) -> bool:
    status = budget.get("status") or {}
    return "observedGeneration" in status and status["observedGeneration"] >= budget["metadata"].get("generation", 0)


def ignores_budgets(pod: dict[str, Any]) -> bool:
    """The Eviction API deletes pods that are not running yet, finished or already terminating without asking a budget."""
    return bool(pod["metadata"].get("deletionTimestamp")) or (pod.get("status") or {}).get("phase") in ("Pending", "Succeeded", "Failed")


def asks(pod: dict[str, Any]) -> bool | None:
    """Whether evicting ``pod`` asks its budget: never for a pod the Eviction API removes regardless, always for a
    ready one; for an unready one it depends on the budget (:func:`passes`)."""
    if ignores_budgets(pod):
        return False
    return True if _ready(pod) else None


def passes(asked: bool | None, budget: dict[str, Any]) -> bool:
    """Whether the eviction of a pod (``asks`` of it) succeeds whatever ``budget`` allows."""
    if asked is not None:
        return not asked
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    # IfHealthyBudget (the default): an unready pod may go while the budget has all the healthy pods it needs.
    return _observed(budget) and status.get("desiredHealthy", 0) > 0 and status.get("currentHealthy", 0) >= status["desiredHealthy"]


def bypasses(pod: dict[str, Any], budget: dict[str, Any]) -> bool:
    """Whether evicting ``pod`` succeeds whatever ``budget`` allows."""
    return passes(asks(pod), budget)


def _percent(value: Any) -> int | None:
    return int(value[:-1]) if isinstance(value, str) and value.endswith("%") else None


def _scaled(value: Any, total: int) -> int:
    """intstr semantics of a budget: an integer as is, a percentage of ``total`` rounded up."""
    percent = _percent(value)
    return math.ceil(percent * total / 100) if percent is not None else int(value)


def expected_pods(budget: dict[str, Any], namespace_pods: list[dict[str, Any]], coverage: Coverage | None = None) -> int:
    """How many pods the budget counts: the disruption controller's figure once it has seen the budget,
    else the selected pods that exist and have not finished."""
    if _observed(budget) and "expectedPods" in budget["status"]:
        return cast(int, budget["status"]["expectedPods"])
    return sum(1 for p in (coverage or Coverage([budget])).selected(budget, namespace_pods) if not pods.finished(p))


def structural_reason(budget: dict[str, Any], namespace_pods: list[dict[str, Any]], coverage: Coverage | None = None) -> str | None:
    """Why ``budget`` can never allow an eviction until an admin changes it or its workload, or None
    (``coverage``: of budgets including this one, when the caller has it)."""
    coverage = coverage or Coverage([budget])
    spec = budget.get("spec") or {}
    name = key_of(budget)
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None and _scaled(max_unavailable, 100) == 0:
        return (f"PodDisruptionBudget {name} sets maxUnavailable {max_unavailable}, so it never allows an eviction; "
                "raise maxUnavailable, or delete the budget for the maintenance")
    if max_unavailable is not None or _percent(min_available) is not None:
        selected = coverage.selected(budget, namespace_pods)
        bare = sorted(key_of(p) for p in selected if pods.controller_of(p) is None)
        if bare:
            return (f"PodDisruptionBudget {name} counts pods by their controller's scale (maxUnavailable or a percentage) "
                    f"but {', '.join(bare)} has no controller, so it allows no eviction; "
                    "give the budget an integer minAvailable, or run the pods under a controller")
    if min_available is not None:
        expected = expected_pods(budget, namespace_pods, coverage)
        needed = _scaled(min_available, expected)
        if needed >= expected:
            return (f"PodDisruptionBudget {name} needs minAvailable {min_available} = {needed} healthy pod(s) and "
                    f"{expected} exist, so it never allows an eviction; scale the workload above {needed} "
                    "or lower minAvailable")
    return None


def temporary_reason(budget: dict[str, Any], waiting: int) -> str | None:
    """Why ``budget`` will refuse some of ``waiting`` evictions for now, or None when it allows them all."""
    status = budget.get("status") or {}
    name = key_of(budget)
    if not _observed(budget):
        return f"PodDisruptionBudget {name} is not yet processed by the disruption controller; evictions wait until it is"
    allowed = status.get("disruptionsAllowed", 0)
    if allowed >= waiting:
        return None
    healthy, desired, expected = status.get("currentHealthy", 0), status.get("desiredHealthy", 0), status.get("expectedPods", 0)
    if allowed <= 0:
        return (f"PodDisruptionBudget {name} allows no eviction now: {healthy} of {expected} pod(s) healthy and it needs "
                f"{desired}; evictions resume once unhealthy pods recover or a rollout finishes")
    return (f"PodDisruptionBudget {name} allows {allowed} eviction(s) at a time for {waiting} pod(s) on this node; "
            "the rest wait until replacements are healthy elsewhere")


@dataclass(frozen=True)
class Read:
    """A pod as the analysis reads it."""

    ref: str  # namespace/name
    budgets: tuple[str, ...]  # namespace/name of the budgets selecting it, sorted
    asks: bool | None  # whether its eviction asks them (:func:`asks`)

    @classmethod
    def of(cls, pod: dict[str, Any], coverage: Coverage) -> Read:
        return cls(key_of(pod), coverage.names(pod), asks(pod))


def analyse(evicting: list[dict[str, Any]], budgets: list[dict[str, Any]], namespace_pods: list[dict[str, Any]],
            coverage: Coverage | None = None) -> Analysis:
    """What holds back the eviction of each pod in ``evicting`` (the node's pods a drain evicts).

    ``budgets`` and ``namespace_pods`` hold the budgets and every pod of the namespaces concerned; ``coverage``
    is that of ``budgets``, when the caller keeps one.
    """
    coverage = coverage or Coverage(budgets)
    groups = coverage.grouped(namespace_pods)
    return assess([Read.of(p, coverage) for p in evicting], coverage, lambda name: groups.get(name, []))


def assess(evicting: Iterable[Read], coverage: Coverage, selected: Callable[[str], list[dict[str, Any]]]) -> Analysis:
    """:func:`analyse`, of pods already read; ``selected`` gives the pods of the namespaces concerned that a budget
    (by namespace/name) selects."""
    blockers: dict[str, list[Blocker]] = {}
    asking: dict[str, list[str]] = {}  # budget name -> node pods whose eviction asks it
    for pod in evicting:
        names = pod.budgets
        if len(names) > 1:
            blockers[pod.ref] = [Blocker(names, Block.STRUCTURAL,
                                         f"pod {pod.ref} is selected by {len(names)} PodDisruptionBudgets ({', '.join(names)}) and "
                                         "the Eviction API refuses such pods; change the budgets' selectors so at most one selects it")]
        elif names and not passes(pod.asks, coverage.budgets[names[0]]):
            asking.setdefault(names[0], []).append(pod.ref)
    assessments = []
    for name, budget in sorted(coverage.budgets.items()):
        waiting = asking.get(name, [])
        blocker = None
        if waiting:
            structural = structural_reason(budget, selected(name), coverage)
            temporary = None if structural else temporary_reason(budget, len(waiting))
            if structural or temporary:
                blocker = Blocker((name,), Block.STRUCTURAL if structural else Block.TEMPORARY, structural or temporary or "")
                for ref in waiting:
                    blockers.setdefault(ref, []).append(blocker)
        assessments.append(Assessment(name, (budget.get("status") or {}).get("disruptionsAllowed", 0), tuple(sorted(waiting)), blocker))
    return Analysis(tuple(assessments), blockers)

"""The node's pods as the planner reads them, kept from one step of a drain to the next.

What a pod is to a drain (its name, whether it must leave, how the drain rules treat it, which budgets select
it, whether its eviction asks them) depends on the pod and on a few terms: the maintenance's pod selector and
rules, which DaemonSets exist, the budgets' selectors. A drain plans again at every change of its node's pods and
budgets; working all of that out for every pod at every step made planning cost what the node holds, not what
changed. A :class:`PodIndex` works it out for a pod when the pod changes, and for all of them only when a term
does. Pure: a cache of what the functions of ``pods``, ``rules`` and ``budgets`` say, never another answer.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api.objects import key_of
from node_maintenance.drain import budgets, pods, rules


@dataclass(frozen=True)
class Facts(budgets.Read):
    """One pod as the planner reads it: as the budgets' analysis reads it, and more."""

    pod: dict[str, Any]
    uid: str
    goes: bool  # the drain waits for it to leave the node
    treatment: rules.Treatment | None  # under drain rules, how they treat it
    finished: bool
    leaving: bool  # being deleted already
    escalable: bool  # an escalation may delete it (``pods.escalable``)


@dataclass(frozen=True)
class _Terms:
    """What the facts depend on besides the pods: when one changes, every pod is looked at again."""

    selector: dict[str, Any] | None
    drain_rules: tuple[rules.Rule, ...] | None
    daemonsets: Mapping[str, bool]
    budget_selectors: tuple[tuple[str, str], ...]


class PodIndex:
    """The pods bound to one node, with their :class:`Facts` kept current.

    The owner gives the pods as its watch keeps them (:meth:`update`), where a changed pod is a new object; the
    planner asks for the facts (:meth:`facts`), and only the pods that are new objects since are worked out again.
    ``worked_out`` counts the pods whose facts were worked out, since creation.
    """

    def __init__(self) -> None:
        self._pods: dict[str, dict[str, Any]] = {}
        self._facts: dict[str, Facts] = {}
        self._to_go: list[str] = []  # keys of the pods that go, sorted
        self._groups: dict[str, set[str]] = {}  # budget -> keys of the pods it selects
        self._terms: _Terms | None = None
        self.worked_out = 0

    @classmethod
    def of(cls, node_pods: Iterable[dict[str, Any]]) -> PodIndex:
        index = cls()
        index.update({key_of(p): p for p in node_pods})
        return index

    def update(self, current: Mapping[str, dict[str, Any]]) -> None:
        """The node's pods are now ``current``, by namespace/name."""
        self._pods = dict(current)

    def __len__(self) -> int:
        return len(self._pods)

    @property
    def pods(self) -> list[dict[str, Any]]:
        return list(self._pods.values())

    def facts(self, selector: dict[str, Any] | None, drain_rules: tuple[rules.Rule, ...] | None,
              daemonsets: Mapping[str, bool], coverage: budgets.Coverage) -> list[Facts]:
        """The pods that go, in namespace/name order, worked out again where a pod or a term changed."""
        terms = _Terms(selector=selector, drain_rules=drain_rules, daemonsets=dict(daemonsets), budget_selectors=coverage.signature)
        anew = terms != self._terms
        self._terms = terms
        gone = [key for key in self._facts if key not in self._pods]
        changed = [key for key, pod in self._pods.items() if anew or (known := self._facts.get(key)) is None or known.pod is not pod]
        for key in gone + changed:
            self._forget(key)
        for key in changed:
            self._learn(key, self._pods[key], terms, coverage)
        return [self._facts[key] for key in self._to_go]

    def selected(self, budget: str) -> list[dict[str, Any]]:
        """The node's pods ``budget`` selects, as of the last :meth:`facts`."""
        return [self._facts[key].pod for key in self._groups.get(budget, ())]

    def _forget(self, key: str) -> None:
        facts = self._facts.pop(key, None)
        if facts is None:
            return
        if facts.goes:
            self._to_go.pop(bisect.bisect_left(self._to_go, key))
        for budget in facts.budgets:
            group = self._groups[budget]
            group.discard(key)
            if not group:
                del self._groups[budget]

    def _learn(self, key: str, pod: dict[str, Any], terms: _Terms, coverage: budgets.Coverage) -> None:
        self.worked_out += 1
        treatment = rules.treatment(pod, terms.drain_rules) if terms.drain_rules is not None else None
        goes = pods.must_go(pod, terms.selector, terms.daemonsets) and not (
            treatment is not None and treatment.behavior is rules.Behavior.SKIP)
        meta = pod["metadata"]
        facts = Facts(ref=key, budgets=coverage.names(pod), asks=budgets.asks(pod), pod=pod, uid=meta["uid"], goes=goes, treatment=treatment,
                      finished=pods.finished(pod), leaving=bool(meta.get("deletionTimestamp")), escalable=pods.escalable(pod))
        self._facts[key] = facts
        if goes:
            bisect.insort(self._to_go, key)
        for budget in facts.budgets:
            self._groups.setdefault(budget, set()).add(key)

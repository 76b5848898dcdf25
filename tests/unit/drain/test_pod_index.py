"""A drain planning step after step works out again only the pods that changed, and decides exactly as from scratch."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from node_maintenance.api.objects import key_of
from node_maintenance.drain import rules
from node_maintenance.drain.budgets import Coverage
from node_maintenance.drain.planner import plan
from node_maintenance.drain.podindex import PodIndex
from tests.unit.builders import HELD, NOW, RUNNING, budget, maintenance, pod, policy_terms

a_pod = partial(pod, namespace="app", uid="uid-{name}", node="n1")
a_budget = partial(budget, namespace="app", generation=1, resource_version="1", observed=1, allowed=1, healthy=10, desired=9, expected=10)
NODE_PODS = [a_pod(f"web{d}-{i}", labels={"app": f"web{d}"}) for d in range(10) for i in range(10)] + [
    a_pod(f"bare-{i}", owner=None) for i in range(5)] + [a_pod("agent", owner="DaemonSet", owner_name="agent")]
BUDGETS = [a_budget(f"web{d}", labels={"app": f"web{d}"}) for d in range(10)]
DAEMONSETS = {"app/agent": True}


def by_key(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {key_of(p): p for p in pods}


def test_a_step_works_out_only_the_pods_that_changed() -> None:
    index = PodIndex()
    coverage = Coverage(BUDGETS)

    def step(pods: list[dict[str, Any]], budgets: list[dict[str, Any]] = BUDGETS, **spec: object) -> int:
        """Plan once over ``pods``; how many pods were worked out for it."""
        before = index.worked_out
        index.update(by_key(pods))
        plan(maintenance(RUNNING, **spec), HELD, index, budgets, NOW, daemonsets=DAEMONSETS, coverage=coverage)
        return index.worked_out - before

    assert step(NODE_PODS) == len(NODE_PODS)
    assert step(NODE_PODS) == 0  # nothing changed: nothing worked out
    terminating = [a_pod("web0-0", labels={"app": "web0"}, deleted_at="2026-01-01T00:00:00Z"), *NODE_PODS[1:]]
    assert step(terminating) == 1
    assert step(terminating[1:]) == 0  # a pod gone is forgotten, nothing else is looked at
    moved = [*(dict(b) for b in BUDGETS[:-1]), a_budget("web9", labels={"app": "other"})]
    assert step(terminating[1:], moved) == len(NODE_PODS) - 1  # a budget's selector changed: every pod again
    assert step(terminating[1:], moved) == 0
    assert step(terminating[1:], moved, terms=policy_terms()) == len(NODE_PODS) - 1  # so do the drain rules


@pytest.mark.parametrize("drain_rules", [None, (rules.Rule({"matchLabels": {"app": "web0"}}, order=1),)], ids=["no policy", "ordered"])
def test_a_kept_index_plans_as_a_fresh_one_through_a_drain(drain_rules: tuple[rules.Rule, ...] | None) -> None:
    """Step after step of a drain (evictions sent, pods leaving, budgets refusing, rules ordering, its DaemonSet
    found gone halfway), the kept index gives the very plan the pods' list gives."""
    index = PodIndex()
    coverage = Coverage(BUDGETS)
    pods, budgets, status, removed = list(NODE_PODS), list(BUDGETS), dict(RUNNING), 0
    for turn in range(12):
        m = maintenance(status, terms=policy_terms(rules=drain_rules))
        daemonsets = DAEMONSETS if turn < 6 else {"app/agent": False}  # gone: its pod goes too (kubectl drain --force)
        index.update(by_key(pods))
        kept = plan(m, HELD, index, budgets, NOW, daemonsets=daemonsets, coverage=coverage)
        fresh = plan(m, HELD, pods, budgets, NOW, daemonsets=daemonsets)
        assert kept == fresh
        removed += len(kept.removals)
        status = kept.status
        sent = {r.uid for r in kept.removals}
        # What the watch shows next: the pods terminating before gone, those just sent terminating.
        pods = [_terminating(p) if p["metadata"]["uid"] in sent else p for p in pods if "deletionTimestamp" not in p["metadata"]]
        budgets = [a_budget(b["metadata"]["name"], labels=b["spec"]["selector"]["matchLabels"], allowed=turn % 2) for b in budgets]
    assert removed > 20 and len(pods) < len(NODE_PODS) - 10 and "app/agent" not in {key_of(p) for p in pods}


def _terminating(p: dict[str, Any]) -> dict[str, Any]:
    return {**p, "metadata": {**p["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}

"""Status that explains a stuck drain: which budgets hold it, their counts, and whether an admin must act."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

from node_maintenance.drain import blocking, status
from node_maintenance.drain.nodes import TAINT
from node_maintenance.drain.planner import plan
from node_maintenance.drain.plans import Maintenance, Plan
from tests.unit.builders import budget, node, pod

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
RS = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs", "controller": True}]
a_pod = partial(pod, namespace="app", uid="uid-{name}", labels={"app": "web"}, owners=RS, node="n1")
a_budget = partial(budget, namespace="app", generation=1, resource_version="1", labels={"app": "web"}, observed=1,
                   healthy=3, desired=3, expected=3)
HELD = node("n1", uid="n", resource_version="1", holder="nm", unschedulable=True, taints=[TAINT])
RUNNING = {"phase": "Running", "totalpods": 2, "evictionPods": 2, "drainStartTime": "2026-01-01T00:00:00Z"}


def run(stored: dict[str, Any], pods: list[dict[str, Any]], budgets: list[dict[str, Any]]) -> Plan:
    return plan(Maintenance(name="nm", node_name="n1", status=stored), HELD, pods, budgets, NOW)


def conditions(result: Plan) -> dict[str, Any]:
    return {c["type"]: (c["status"], c["reason"]) for c in result.status["conditions"]}


def test_a_structural_block_is_named_with_its_counts_and_fires_one_event() -> None:
    budget = a_budget("web", allowed=0, healthy=2, desired=2, expected=2, minAvailable=2)
    first = run(RUNNING, [a_pod("web-0"), a_pod("web-1")], [budget])
    (entry,) = first.status["blockingBudgets"]
    assert entry == {"namespace": "app", "name": "web", "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2,
                     "expectedPods": 2, "block": "Structural", "message": entry["message"], "blockedPods": 2}
    assert "minAvailable 2" in entry["message"] and "lower minAvailable" in entry["message"]
    assert conditions(first)["DrainBlocked"] == ("True", blocking.Reason.DEADLOCK)
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "PodDisruptionBudgetDeadlock")]
    again = run(first.status, [a_pod("web-0"), a_pod("web-1")], [budget])
    assert again.events == () and again.status["blockingBudgets"] == first.status["blockingBudgets"]


def test_max_unavailable_zero_is_structural() -> None:
    result = run(RUNNING, [a_pod("web-0")], [a_budget("web", allowed=0, maxUnavailable=0)])
    assert result.status["blockingBudgets"][0]["block"] == "Structural"
    assert "maxUnavailable 0" in result.status["blockingBudgets"][0]["message"]


def test_a_budget_waiting_on_unhealthy_pods_is_temporary_and_fires_no_event() -> None:
    budget = a_budget("web", allowed=0, healthy=2, desired=3, expected=4, minAvailable=3)
    result = run(RUNNING, [a_pod("web-0")], [budget])
    (entry,) = result.status["blockingBudgets"]
    assert entry["block"] == "Temporary" and entry["currentHealthy"] == 2 and entry["desiredHealthy"] == 3
    assert conditions(result)["DrainBlocked"] == ("True", blocking.Reason.TEMPORARY)
    assert result.events == ()


def test_a_budget_pacing_evictions_does_not_block() -> None:
    result = run(RUNNING, [a_pod("web-0"), a_pod("web-1")], [a_budget("web", allowed=1, expected=4, minAvailable=3)])
    assert len(result.removals) == 1 and result.status["blockingBudgets"] == []
    assert "DrainBlocked" not in conditions(result)  # never blocked: no condition at all


def test_the_condition_turns_false_once_the_block_is_gone() -> None:
    blocked = run(RUNNING, [a_pod("web-0")], [a_budget("web", allowed=0, maxUnavailable=0)])
    freed = run(blocked.status, [a_pod("web-0")], [a_budget("web", allowed=1, maxUnavailable=1)])
    assert freed.status["blockingBudgets"] == [] and conditions(freed)["DrainBlocked"] == ("False", "NotBlocked")
    done = run(freed.status, [], [])
    assert conditions(done)["DrainBlocked"][0] == "False"


def test_a_pod_under_two_budgets_blocks_both_structurally() -> None:
    budgets = [a_budget("web", allowed=1, minAvailable=1), a_budget("all", allowed=1, minAvailable=1)]
    result = run(RUNNING, [a_pod("web-0")], budgets)
    assert [(e["name"], e["block"]) for e in result.status["blockingBudgets"]] == [("all", "Structural"), ("web", "Structural")]
    assert len([e for e in result.events if e.reason == blocking.Reason.DEADLOCK]) == 2


def test_new_deadlocks_compares_with_the_previous_status() -> None:
    entry = {"namespace": "app", "name": "web", "block": "Structural"}
    assert blocking.new_deadlocks([], [entry]) == [entry]
    assert blocking.new_deadlocks([entry], [entry]) == []
    assert blocking.new_deadlocks([{**entry, "block": "Temporary"}], [entry]) == [entry]


def test_status_without_a_drain_has_no_drain_blocked_condition() -> None:
    built = status.build({}, phase=status.Phase.FAILED, total=0, eviction_pods=0, pending=[], last_error="x", generation=1, now="2026-01-01T00:00:00Z")
    assert built["blockingBudgets"] == [] and [c["type"] for c in built["conditions"]] == ["Drained"]

"""waitForHealthy without a cluster: what a drain records of the pods it evicts, how a node given back is judged,
the cap, the policy's status, and the slot a recovering node keeps in decide()."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from node_maintenance.drain import evicted
from node_maintenance.drain.planner import plan
from node_maintenance.policy import health, line, model
from node_maintenance.policy.verdicts import VerdictKind
from tests.unit.builders import HELD, NOW, RUNNING, ago, budget, maintenance, nm, nm_policy, node, pod, policy_terms, scene_pod

web_budget = partial(budget, "web", namespace="app", generation=2, observed=2)
BUDGET = ("PodDisruptionBudget", "app", "web")
SET = ("StatefulSet", "app", "db")
BACK = 10**6  # seconds counted since the node was seen given back: long ago, so the wall clock's reckoning counts


def replicas(name: str, wanted: int, available: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "app", "generation": 1}, "spec": {"replicas": wanted},
            "status": {"observedGeneration": 1, "availableReplicas": available}}


def entry(*workloads: tuple[str, str, str], since: str = ago(10)) -> dict[str, Any]:
    return {"node": "n1", "since": since, "waitingFor": [],
            "workloads": [{"kind": kind, "namespace": ns, "name": name} for kind, ns, name in workloads]}


# ------------------------------------------------------------------ what a drain records
def test_a_pod_is_judged_by_its_budgets_else_its_replicaset_or_statefulset() -> None:
    assert evicted.workloads_of(["app/a", "app/b"], pod("p", namespace="app")) == [("PodDisruptionBudget", "app", "a"),
                                                                                  ("PodDisruptionBudget", "app", "b")]
    assert evicted.workloads_of([], pod("p", namespace="app", owner_name="web-5d8f")) == [("ReplicaSet", "app", "web-5d8f")]
    assert evicted.workloads_of([], pod("p", namespace="app", owner="StatefulSet", owner_name="db")) == [SET]
    assert evicted.workloads_of([], pod("p", namespace="app", owner=None)) == []
    assert evicted.workloads_of([], pod("p", namespace="app", owner="Job")) == []


@pytest.mark.parametrize("terms", [{}, {"rules": None}], ids=["under a policy", "under none"])
def test_a_drain_records_what_it_evicts_and_keeps_it_once_the_pods_are_gone(terms: dict[str, Any]) -> None:
    """Under no policy too: its node may be relabelled into a pool that waits for health while it drains, and that
    pool's slot is then kept until what the drain evicted before is healthy."""
    node_pods = [scene_pod("web-0", labels={"app": "web"}), scene_pod("db-0", owner="StatefulSet", owner_name="db"),
                 scene_pod("done", owner="Job", phase="Succeeded")]
    budgets = [web_budget(labels={"app": "web"}, allowed=1)]
    first = plan(maintenance(RUNNING, terms=policy_terms(**terms)), HELD, node_pods, budgets, NOW)
    recorded = [{"kind": "PodDisruptionBudget", "namespace": "app", "name": "web"}, {"kind": "StatefulSet", "namespace": "app", "name": "db"}]
    assert first.status["evictedWorkloads"] == recorded
    assert plan(maintenance(first.status, terms=policy_terms(**terms)), HELD, [], budgets, NOW).status["evictedWorkloads"] == recorded


# ------------------------------------------------------------------ judging a node given back
@pytest.mark.parametrize(
    ("objects", "waiting_for"),
    [
        ({BUDGET: web_budget(healthy=3, expected=3), SET: replicas("db", 2, 2)}, ()),
        ({BUDGET: web_budget(healthy=3, expected=3), SET: None}, ()),  # a set gone: nothing left to wait for
        ({BUDGET: web_budget(healthy=2, desired=2, expected=3), SET: replicas("db", 2, 2)}, ("PodDisruptionBudget app/web: 2 of 3 healthy",)),
        ({BUDGET: web_budget(healthy=3, expected=3), SET: replicas("db", 2, 1)}, ("StatefulSet app/db: 1 of 2 available",)),
        ({BUDGET: web_budget(observed=1, healthy=3, expected=3), SET: replicas("db", 2, 2)},
         ("PodDisruptionBudget app/web: its controller has not observed its latest change yet",)),
    ],
)
def test_a_node_given_back_waits_for_every_workload_evicted_from_it(objects: dict[Any, Any], waiting_for: tuple[str, ...]) -> None:
    judged = health.judge(entry(BUDGET, SET), objects, {}, 600, NOW, BACK)
    assert (judged.state, judged.waiting_for) == ((health.WAITING, waiting_for) if waiting_for else (health.HEALTHY, ()))
    if waiting_for:
        assert judged.expires_in == 590


REPLICA_SET = ("ReplicaSet", "app", "web-5d8f")


@pytest.mark.parametrize(
    ("workload", "obj", "why"),
    [
        (BUDGET, None, "PodDisruptionBudget app/web: deleted, and what owns the pods it covered is not recorded"),
        (REPLICA_SET, replicas("web-5d8f", 0, 0), ("ReplicaSet app/web-5d8f: scaled to zero (a rollout may have replaced it), "
                                                   "and its Deployment is not recorded")),
    ],
)
def test_a_deleted_budget_or_a_replicaset_scaled_to_zero_is_not_healthy_and_holds_until_the_cap(
        workload: tuple[str, str, str], obj: dict[str, Any] | None, why: str) -> None:
    """Nothing recorded tells how the evicted pods' replacements stand: the drain records a budget's pods by their budget
    only, and a Deployment's pods by their ReplicaSet. In doubt, the slot is held until waitForHealthySeconds."""
    judged = health.judge(entry(workload), {workload: obj}, {}, 600, NOW, BACK)
    assert (judged.state, judged.waiting_for, judged.expires_in) == (health.WAITING, (why,), 590)
    assert health.judge(entry(workload, since=ago(600)), {workload: obj}, {}, 600, NOW, BACK).state == health.GAVE_UP


def test_a_workload_not_known_now_is_not_healthy() -> None:
    judged = health.judge(entry(BUDGET), {BUDGET: web_budget(healthy=3, expected=3)}, {"PodDisruptionBudget": "the watch failed: 503"}, 600, NOW, BACK)
    assert judged.state == health.WAITING and judged.waiting_for == ("PodDisruptionBudget app/web: unknown, the watch failed: 503",)


def test_past_the_cap_the_wait_is_given_up_naming_what_it_waited_for() -> None:
    judged = health.judge(entry(BUDGET, since=ago(60)), {BUDGET: web_budget(healthy=0, expected=1)}, {}, 60, NOW, BACK)
    assert judged.state == health.GAVE_UP
    assert health.gave_up_message(judged, 60) == ("gave up waiting after 60s (waitForHealthySeconds) for the workloads evicted from node n1: "
                                                  "PodDisruptionBudget app/web: 0 of 1 healthy; its slot is free again")


def test_a_node_still_held_waits_for_its_hand_back_past_the_cap_and_whatever_its_workloads() -> None:
    """The wait begins at the hand-back: an entry is written first, and a hand-back the API refuses for a while must
    not spend the cap before the node is back, nor an entry judged healthy meanwhile let the next node go."""
    judged = health.judge(entry(BUDGET, since=ago(6000)), {BUDGET: web_budget(healthy=3, expected=3)}, {}, 600, NOW, None)
    assert (judged.state, judged.waiting_for, judged.expires_in) == (health.WAITING, (health.NOT_GIVEN_BACK,), None)
    judged = health.judge(entry(BUDGET), {BUDGET: web_budget(healthy=2, expected=3)}, {}, 600, NOW, None)
    assert judged.waiting_for == (health.NOT_GIVEN_BACK, "PodDisruptionBudget app/web: 2 of 3 healthy")


@pytest.mark.parametrize(("since", "counted", "state", "left"), [
    (ago(3600), 30, health.WAITING, 570),  # a wall clock set forward an hour: counted on the monotonic clock
    (ago(30), 3600, health.WAITING, 570),  # a wall clock set back (or an operator that started): the later reckoning
    (ago(3600), 600, health.GAVE_UP, None),
])
def test_the_wait_lasts_the_smaller_of_the_wall_clock_s_reckoning_and_the_count_since_the_hand_back(
        since: str, counted: float, state: str, left: float | None) -> None:
    judged = health.judge(entry(BUDGET, since=since), {BUDGET: web_budget(healthy=0, expected=1)}, {}, 600, NOW, counted)
    assert (judged.state, judged.expires_in if state == health.WAITING else None) == (state, left)


def test_the_soonest_cap_is_that_of_a_node_given_back_and_entries_are_counted_by_node_and_since() -> None:
    back, held = entry(BUDGET, since=ago(100)), {**entry(BUDGET, since=ago(500)), "node": "n2"}
    judged = health.judge_all({"p": 600}, {"p": [back, held]}, {BUDGET: web_budget(healthy=0, expected=1)}, {}, {}, NOW,
                              {health.key(back): 40, ("n2", ago(9)): 5}, {})
    assert {n: j.state for n, j in judged.judged["p"].items()} == {"n1": health.WAITING, "n2": health.WAITING}
    assert judged.judged["p"]["n2"].waiting_for == (health.NOT_GIVEN_BACK, "PodDisruptionBudget app/web: 0 of 1 healthy")
    assert (judged.expires_in, judged.recovering) == (560, {"p": ["n1", "n2"]})


def test_a_node_its_policy_s_status_still_lists_keeps_its_slot_once_healthy_until_a_status_drops_it() -> None:
    """Else a node taken meanwhile would count twice to whoever reads that status, an operator restarted among them."""
    healthy = entry(BUDGET)
    judged = health.judge_all({"p": 600, "q": None}, {"p": [healthy]}, {BUDGET: web_budget(healthy=1, expected=1)}, {}, {}, NOW,
                              {health.key(healthy): 40}, {"p": ["n1"], "q": ["n7"]})
    assert judged.judged["p"]["n1"].state == health.HEALTHY
    assert judged.recovering == {"p": ["n1"], "q": ["n7"]}  # q no longer waits for health: its list goes with its next status


def test_the_policy_status_names_what_each_node_waits_for() -> None:
    waiting = health.Judgement("n1", health.WAITING, ("PodDisruptionBudget app/web: 2 of 3 healthy",), 30)
    recovering, condition = health.status([entry(BUDGET)], {"n1": waiting}, "", {})
    assert recovering == [{**entry(BUDGET), "waitingFor": ["PodDisruptionBudget app/web: 2 of 3 healthy"]}]
    assert condition[:2] == ("True", "WaitingForHealthy") and "node n1 waits for PodDisruptionBudget app/web: 2 of 3 healthy" in condition[2]
    healthy = {"n1": health.Judgement("n1", health.HEALTHY)}
    healthy_again = "the workloads evicted from every node given back are healthy again"
    assert health.status([entry(BUDGET)], healthy, "", {}) == ([], ("False", "Healthy", healthy_again))
    # A wait given up stays said until another starts.
    assert health.status([entry(BUDGET)], healthy, "gave up", {}) == ([], ("False", "GaveUp", "gave up"))
    assert health.status([], {}, "", {"reason": "GaveUp", "message": "gave up"}) == ([], ("False", "GaveUp", "gave up"))


# ------------------------------------------------------------------ the slot a recovering node keeps
a_node = partial(node, labels={"pool": "a"}, annotations={}, unschedulable=False, ready=True)
POLICY = model.Policy.of(nm_policy("p", node_selector={"matchLabels": {"pool": "a"}}, maxParallel=1, waitForHealthy=True))


def test_a_recovering_node_keeps_its_slot_until_dropped() -> None:
    nodes = [a_node("n0"), a_node("n1")]
    in_line = [nm("next", "n1", created="2026-01-01T10:00:00Z")]
    assert line.decide([POLICY], nodes, in_line, recovering={"p": ["n0"]}, now=NOW).verdicts["next"].kind == VerdictKind.WAITING
    assert line.decide([POLICY], nodes, in_line, recovering={"p": []}, now=NOW).verdicts["next"].kind == VerdictKind.ADMITTED
    assert line.decide([POLICY], nodes, in_line, recovering={"other": ["n0"]}, now=NOW).verdicts["next"].kind == VerdictKind.ADMITTED


def test_a_recovering_node_taken_again_counts_once() -> None:
    nodes = [a_node("n0", holder="again", unschedulable=True), a_node("n1")]
    in_line = [nm("again", "n0", created="2026-01-01T10:00:00Z"), nm("next", "n1", created="2026-01-01T10:00:01Z")]
    two = model.Policy.of(nm_policy("p", node_selector={"matchLabels": {"pool": "a"}}, maxParallel=2, waitForHealthy=True))
    assert line.decide([two], nodes, in_line, recovering={"p": ["n0"]}, now=NOW).verdicts["next"].kind == VerdictKind.ADMITTED


def test_the_cap_defaults_to_600_seconds() -> None:
    assert POLICY.wait_for_healthy and POLICY.wait_for_healthy_seconds == health.DEFAULT_WAIT_SECONDS == 600
    assert not model.Policy.of(nm_policy("q")).wait_for_healthy

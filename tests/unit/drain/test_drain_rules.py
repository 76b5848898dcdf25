"""The drain rules of a NodeMaintenancePolicy: which pods go in which order, which wait or stay, and what the planner makes of them."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.drain import rules
from node_maintenance.drain.planner import plan
from tests.unit.builders import HELD, NOW, RUNNING, ago, maintenance, policy_terms, scene_pod

DB = {"podSelector": {"matchLabels": {"app": "db"}}, "order": 10}
WEB = {"podSelector": {"matchLabels": {"app": "web"}}, "order": -5}
BATCH = {"podSelector": {"matchLabels": {"app": "batch"}}, "behavior": "WaitCompleted"}
CACHE = {"podSelector": {"matchLabels": {"app": "cache"}}, "namespaces": ["infra"], "behavior": "Skip"}
RULES = tuple(rules.Rule.of(r) for r in (WEB, DB, BATCH, CACHE))


def _annotated(value: str, **kw: Any) -> dict[str, Any]:
    return scene_pod("x", annotations={rules.ANNOTATION: value}, **kw)


@pytest.mark.parametrize(
    ("pod", "behavior", "order"),
    [
        (scene_pod("p", labels={"app": "db"}), rules.Behavior.DRAIN, 10),
        (scene_pod("p", labels={"app": "web"}), rules.Behavior.DRAIN, -5),
        (scene_pod("p", labels={"app": "other"}), rules.Behavior.DRAIN, 0),
        (scene_pod("p", labels={"app": "batch"}), rules.Behavior.WAIT_COMPLETED, 0),
        (scene_pod("p", namespace="infra", labels={"app": "cache"}), rules.Behavior.SKIP, 0),
        (scene_pod("p", namespace="app", labels={"app": "cache"}), rules.Behavior.DRAIN, 0),  # the rule is limited to namespace infra
        # The annotation overrides every rule, in either case.
        (_annotated("skip", labels={"app": "db"}), rules.Behavior.SKIP, 0),
        (_annotated("Wait-Completed", labels={"app": "web"}), rules.Behavior.WAIT_COMPLETED, 0),
        (_annotated("sikp"), rules.Behavior.INVALID, 0),
    ],
)
def test_each_pod_gets_its_annotation_or_first_matching_rule(pod: dict[str, Any], behavior: rules.Behavior, order: int) -> None:
    treatment = rules.treatment(pod, RULES)
    assert (treatment.behavior, treatment.order) == (behavior, order)


def test_first_matching_rule_wins() -> None:
    first = (rules.Rule.of({"podSelector": {}, "behavior": "Skip"}), rules.Rule.of(DB))
    assert rules.treatment(scene_pod("p", labels={"app": "db"}), first).behavior is rules.Behavior.SKIP


def test_a_misspelt_annotation_protects_the_pod_and_says_how_to_fix_it() -> None:
    why = rules.treatment(_annotated("sikp"), ()).why
    assert "app/x" in why and "'sikp'" in why and "neither skip nor wait-completed" in why


@pytest.mark.parametrize(
    ("pods", "held"),
    [
        # Lowest order first: the others wait.
        ([scene_pod("w", labels={"app": "web"}), scene_pod("d", labels={"app": "db"}), scene_pod("o")], {"uid-d": "", "uid-o": ""}),
        # A terminating pod of the lowest order still holds the next order back.
        ([scene_pod("w", labels={"app": "web"}, deleted_at=ago(1)), scene_pod("o")], {"uid-o": ""}),
        # Finished pods may always go, whatever their order; the next order starts.
        ([scene_pod("w", labels={"app": "web"}, phase="Succeeded"), scene_pod("o"), scene_pod("d", labels={"app": "db"})], {"uid-d": ""}),
        # WaitCompleted pods are never removed while running, and do not hold orders back.
        ([scene_pod("b", labels={"app": "batch"}), scene_pod("d", labels={"app": "db"})], {"uid-b": "app/b is left to complete by itself (WaitCompleted)"}),
        ([scene_pod("b", labels={"app": "batch"}, phase="Succeeded")], {}),
    ],
)
def test_held_pods(pods: list[dict[str, Any]], held: dict[str, str]) -> None:
    assert rules.held([(p, rules.treatment(p, RULES)) for p in pods]) == held


def test_the_planner_evicts_order_by_order_and_leaves_skipped_pods() -> None:
    pods = [scene_pod("w", labels={"app": "web"}), scene_pod("d", labels={"app": "db"}), scene_pod("c", namespace="infra", labels={"app": "cache"})]
    m = maintenance(dict(RUNNING), terms=policy_terms(rules=RULES))
    first = plan(m, HELD, pods, [], NOW)
    assert [r.name for r in first.removals] == ["w"]
    assert [p["name"] for p in first.status["pendingPodsRefs"]] == ["d", "w"]  # the skipped cache pod is not waited for
    second = plan(m, HELD, pods[1:], [], NOW)
    assert [r.name for r in second.removals] == ["d"]
    assert plan(m, HELD, pods[2:], [], NOW).phase == "Succeeded"


def test_the_planner_waits_for_wait_completed_pods_and_deletes_them_once_done() -> None:
    m = maintenance(dict(RUNNING), terms=policy_terms(rules=RULES))
    running = plan(m, HELD, [scene_pod("b", labels={"app": "batch"})], [], NOW)
    assert running.phase == "Running" and not running.removals
    assert "app/b is left to complete by itself (WaitCompleted)" in running.status["lastError"]
    done = plan(m, HELD, [scene_pod("b", labels={"app": "batch"}, phase="Succeeded")], [], NOW)
    assert [(r.name, r.delete) for r in done.removals] == [("b", True)]


def test_without_a_policy_annotations_change_nothing() -> None:
    decided = plan(maintenance(dict(RUNNING)), HELD, [_annotated("skip")], [], NOW)
    assert [r.name for r in decided.removals] == ["x"]


def test_a_hold_takes_the_node_but_evicts_nothing() -> None:
    node = {**HELD, "metadata": {**HELD["metadata"], "annotations": {}}, "spec": {}}
    decided = plan(maintenance(terms=policy_terms(hold="preDrain Job running")), node, [scene_pod("p")], [], NOW)
    assert decided.node_patch is not None and decided.holds_node and not decided.removals
    assert decided.phase == "Running" and decided.status["lastError"] == "preDrain Job running"
    failed = plan(maintenance(dict(RUNNING), terms=policy_terms(hold="preDrain Job failed", hold_failed=True)), HELD, [scene_pod("p")], [], NOW)
    assert failed.phase == "Failed" and not failed.removals and failed.holds_node

"""Which PodDisruptionBudgets hold a drain back, and whether the block is structural or temporary."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from node_maintenance.drain import pods
from node_maintenance.drain.budgets import Block, Coverage, analyse, bypasses, expected_pods, structural_reason, temporary_reason
from tests.unit import builders

DELETED = "2025-01-01T00:00:00Z"
pod = partial(builders.pod, labels={"app": "web"})
pdb = partial(builders.budget, generation=2, labels={"app": "web"}, observed=2, allowed=0, healthy=3, desired=3, expected=3)
# Before the disruption controller has seen it, a budget has no status at all.
unobserved = partial(builders.budget, generation=2, labels={"app": "web"})


# ---------------------------------------------------------------- which budgets cover a pod
def covering(subject: dict[str, Any], budgets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    coverage = Coverage(budgets)
    return [coverage.budgets[name] for name in coverage.names(subject)]


def test_a_budget_covers_matching_pods_of_its_own_namespace_only() -> None:
    assert covering(pod("a"), [pdb()]) != []
    assert covering(pod("a", namespace="other"), [pdb()]) == []
    assert covering(pod("a", labels={"app": "db"}), [pdb()]) == []


def test_policy_v1_selector_semantics_none_selects_nothing_empty_selects_all() -> None:
    without = pdb("none")
    without["spec"].pop("selector")
    assert covering(pod("a"), [without]) == []
    assert [b["metadata"]["name"] for b in covering(pod("a", labels={"x": "y"}), [pdb("all", selector={})])] == ["all"]


def test_a_kept_coverage_matches_each_label_set_once_while_the_selectors_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    """A drain plans again at every change; which budgets select its pods is not worked out again each time."""
    calls: list[str] = []
    real = pods.matches_selector
    def counted(labels: dict[str, str], selector: dict[str, Any] | None) -> bool:
        calls.append("match")
        return real(labels, selector)

    monkeypatch.setattr(pods, "matches_selector", counted)
    web = [pod(f"web-{i}", labels={"app": "web", "pod-template-hash": "1"}) for i in range(50)]
    budgets = [pdb("web", allowed=1), pdb("db", labels={"app": "db"}, allowed=1)]
    coverage = Coverage(budgets)
    for allowed in (1, 0, 1):  # the budgets' status changes with every eviction; their selectors do not
        coverage = coverage.over([pdb("web", allowed=allowed), pdb("db", labels={"app": "db"}, allowed=1)])
        assert [[coverage.budgets[n]["status"]["disruptionsAllowed"] for n in coverage.names(p)] for p in web] == [[allowed]] * 50
    assert len(calls) == 2  # one label set, two budgets of its namespace: matched once each


def test_a_kept_coverage_follows_a_changed_selector_and_budgets_come_and_go() -> None:
    coverage = Coverage([pdb("web")])
    assert coverage.names(pod("a")) == ("ns/web",)
    coverage = coverage.over([pdb("web", labels={"app": "db"})])
    assert coverage.names(pod("a")) == ()
    coverage = coverage.over([pdb("web", labels={"app": "db"}), pdb("all", selector={})])
    assert coverage.names(pod("a")) == ("ns/all",)
    assert coverage.over([]).names(pod("a")) == ()


# ---------------------------------------------------------------- pods the Eviction API lets go regardless
@pytest.mark.parametrize("subject", [pod("p", phase="Pending"), pod("p", phase="Succeeded"), pod("p", deleted_at=DELETED)])
def test_pods_not_running_or_terminating_ignore_budgets(subject: dict[str, Any]) -> None:
    assert bypasses(subject, pdb(allowed=0))


def test_unready_pod_goes_with_always_allow_or_a_healthy_budget_only() -> None:
    unready = pod("p", ready=False)
    assert bypasses(unready, pdb(allowed=0, unhealthyPodEvictionPolicy="AlwaysAllow", healthy=1, desired=3))
    assert bypasses(unready, pdb(allowed=0, healthy=3, desired=3))  # IfHealthyBudget and the budget is whole
    assert not bypasses(unready, pdb(allowed=0, healthy=2, desired=3))
    assert not bypasses(pod("p"), pdb(allowed=0, unhealthyPodEvictionPolicy="AlwaysAllow"))


# ---------------------------------------------------------------- structural: never without an admin
@pytest.mark.parametrize("spec", [{"maxUnavailable": 0}, {"maxUnavailable": "0%"}, {"minAvailable": 3}, {"minAvailable": 4},
                                  {"minAvailable": "100%"}])
def test_budgets_that_can_never_allow_an_eviction_are_structural(spec: dict[str, Any]) -> None:
    reason = structural_reason(pdb(expected=3, **spec), [pod(f"p{i}") for i in range(3)])
    assert reason and "ns/web" in reason


@pytest.mark.parametrize("spec", [{"maxUnavailable": 1}, {"maxUnavailable": "10%"}, {"minAvailable": 2}, {"minAvailable": "50%"}])
def test_budgets_that_allow_some_eviction_are_not_structural(spec: dict[str, Any]) -> None:
    assert structural_reason(pdb(expected=3, **spec), [pod(f"p{i}") for i in range(3)]) is None


def test_percentages_round_up_like_the_disruption_controller() -> None:
    # 50% of 1 pod is 1 pod: the single replica can never go.
    assert structural_reason(pdb(expected=1, minAvailable="50%"), [pod("p")])
    assert structural_reason(pdb(expected=2, minAvailable="50%"), [pod("p"), pod("q")]) is None


def test_min_available_counts_the_pods_that_exist_until_the_controller_has_seen_the_budget() -> None:
    budget = unobserved(minAvailable=2)
    assert expected_pods(budget, [pod("a"), pod("b"), pod("done", phase="Succeeded"), pod("x", labels={"app": "db"})]) == 2
    assert structural_reason(budget, [pod("a"), pod("b")])
    assert structural_reason(budget, [pod("a"), pod("b"), pod("c")]) is None


def test_scale_based_budget_over_pods_without_controller_is_structural() -> None:
    reason = structural_reason(pdb(maxUnavailable=1), [pod("bare", owner=None), pod("p")])
    assert reason and "ns/bare" in reason and "integer minAvailable" in reason
    assert structural_reason(pdb(minAvailable=1, expected=2), [pod("bare", owner=None), pod("p")]) is None


# ---------------------------------------------------------------- temporary: waiting helps
def test_unhealthy_or_rolling_budget_is_temporary() -> None:
    reason = temporary_reason(pdb(allowed=0, healthy=2, desired=2, expected=3, minAvailable=2), 1)
    assert reason and "2 of 3" in reason


def test_budget_allowing_fewer_evictions_than_pods_on_the_node_paces_the_drain() -> None:
    reason = temporary_reason(pdb(allowed=1, minAvailable=2), 3)
    assert reason and "1 eviction(s) at a time for 3" in reason
    assert temporary_reason(pdb(allowed=3, minAvailable=2), 3) is None


def test_a_budget_not_yet_observed_holds_evictions_for_now() -> None:
    assert "not yet processed" in (temporary_reason(unobserved(minAvailable=1), 1) or "")


# ---------------------------------------------------------------- the whole node
def test_analysis_attributes_each_block_to_its_pods() -> None:
    web = [pod(f"web-{i}") for i in range(3)]
    guarded = pod("guarded", labels={"app": "guarded"}, owner=None)
    free = pod("free", labels={"app": "free"})
    budgets = [pdb("web", allowed=1, healthy=3, desired=2, minAvailable=2),
               pdb("guarded", selector={"matchLabels": {"app": "guarded"}}, allowed=0, healthy=1, desired=1, expected=1, minAvailable=1)]
    analysis = analyse([*web, guarded, free], budgets, [*web, guarded, free])
    assert [b.block for b in analysis.blockers["ns/guarded"]] == [Block.STRUCTURAL]
    assert all([b.block for b in analysis.blockers[f"ns/web-{i}"]] == [Block.TEMPORARY] for i in range(3))
    assert "ns/free" not in analysis.blockers
    by_name = {a.name: a for a in analysis.budgets}
    assert by_name["ns/web"].pods == ("ns/web-0", "ns/web-1", "ns/web-2") and by_name["ns/web"].disruptions_allowed == 1


def test_pod_under_two_budgets_is_refused_whatever_they_allow() -> None:
    budgets = [pdb("a", allowed=5, minAvailable=1), pdb("b", allowed=5, minAvailable=1)]
    (blocker,) = analyse([pod("p")], budgets, [pod("p")]).blockers["ns/p"]
    assert blocker.block is Block.STRUCTURAL and blocker.budgets == ("ns/a", "ns/b")


def test_pods_the_eviction_api_lets_go_are_not_blocked() -> None:
    budgets = [pdb("web", allowed=0, maxUnavailable=0)]
    analysis = analyse([pod("pending", phase="Pending")], budgets, [pod("pending", phase="Pending")])
    assert analysis.blockers == {} and analysis.budgets[0].blocker is None

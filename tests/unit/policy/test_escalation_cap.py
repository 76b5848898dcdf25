"""A policy's spec.drain.maxEscalation caps the escalation ladder of every maintenance it governs, its own or inherited
from the policy's drain defaults, and the maintenance's status names the policy and the field; kubectl nm plan
--escalation shows the capped ladder. A cap only drops steps; the drain rules keep holding their pods whatever the
ladder."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.drain import planner
from node_maintenance.drain.plans import Action, Escalation, Maintenance
from node_maintenance.policy import model, terms
from node_maintenance.policy.verdicts import Verdict, VerdictKind
from node_maintenance_cli import plan
from tests.unit.builders import HELD, NOW, RUNNING, ago, budget, nm, nm_policy, scene_pod, seen_by_policies

DELETE, FORCE = Escalation(after=30, action=Action.DELETE_PODS), Escalation(after=60, action=Action.FORCE_DELETE_PODS)
BOTH = [{"afterSeconds": 30, "action": "DeletePods"}, {"afterSeconds": 60, "action": "ForceDeletePods"}]
ONLY_DELETE = [{"afterSeconds": 30, "action": "DeletePods"}]
WEB = scene_pod("web-0", labels={"app": "web"})
BATCH = scene_pod("batch-0", labels={"app": "batch"})
WAIT_FOR_BATCH = [{"podSelector": {"matchLabels": {"app": "batch"}}, "behavior": "WaitCompleted"}]
zero_budget = partial(budget, namespace="app", generation=2, resource_version="1", observed=2, healthy=1, desired=1, expected=1, allowed=0)


def under(policy_drain: dict[str, Any], own: dict[str, Any] | None = None, *, stored: dict[str, Any] | None = None,
          **spec: Any) -> Maintenance:
    """NodeMaintenance nm (its own spec.drain ``own``), admitted by policy "rolling" whose drain defaults are ``policy_drain``."""
    policy = model.Policy.of(nm_policy("rolling", drain=policy_drain, **spec))
    own_drain: dict[str, Any] = {"drain": own} if own else {}
    body = nm("nm", "n1", uid="1234", status={**RUNNING, "drainStartTime": ago(61), **(stored or {})}, **own_drain)
    return terms.maintenance(body, seen_by_policies(HELD, Verdict(kind=VerdictKind.ADMITTED, policy=policy)), {}, NOW)


def capped(m: Maintenance) -> tuple[str, str, str] | None:
    """The EscalationCapped condition the terms ask the status to carry: (status, reason, message), or None."""
    found = [c for c in m.terms.conditions if c.type == "EscalationCapped"]
    return (found[0].status, found[0].reason, found[0].message) if found else None


CAPPED_AT_NONE = ("True", "CappedByPolicy",
                  "escalation capped at None by policy rolling (spec.drain.maxEscalation): DeletePods after 30s, ForceDeletePods after 60s dropped")
CAPPED_AT_DELETE = ("True", "CappedByPolicy",
                    "escalation capped at DeletePods by policy rolling (spec.drain.maxEscalation): ForceDeletePods after 60s dropped")


@pytest.mark.parametrize(("policy_drain", "own", "ladder", "condition"), [
    pytest.param({"maxEscalation": "None"}, {"escalation": BOTH}, (), CAPPED_AT_NONE, id="cap None drops the whole ladder"),
    pytest.param({"maxEscalation": "DeletePods"}, {"escalation": BOTH}, (DELETE,), CAPPED_AT_DELETE,
                 id="cap DeletePods drops ForceDeletePods and keeps DeletePods"),
    pytest.param({}, {"escalation": BOTH}, (DELETE, FORCE), None, id="no cap keeps both steps"),
    pytest.param({"maxEscalation": "ForceDeletePods"}, {"escalation": BOTH}, (DELETE, FORCE), None, id="cap ForceDeletePods keeps both steps"),
    pytest.param({"maxEscalation": "DeletePods"}, {"escalation": ONLY_DELETE}, (DELETE,), None, id="a cap that drops nothing says nothing"),
    pytest.param({"maxEscalation": "DeletePods", "escalation": BOTH}, None, (DELETE,), CAPPED_AT_DELETE,
                 id="an inherited ladder is capped the same"),
    pytest.param({"maxEscalation": "None", "escalation": BOTH}, None, (), CAPPED_AT_NONE, id="an inherited ladder is dropped by cap None"),
])
def test_the_policy_caps_the_ladder_of_the_maintenances_it_governs(policy_drain: dict[str, Any], own: dict[str, Any] | None,
                                                                    ladder: tuple[Escalation, ...], condition: tuple[str, str, str] | None) -> None:
    m = under(policy_drain, own)
    assert m.escalation == ladder
    assert capped(m) == condition


def test_the_status_says_so_and_the_drain_follows_the_capped_ladder() -> None:
    m = under({"maxEscalation": "DeletePods", "escalation": BOTH})  # 61 s in: ForceDeletePods would be due, uncapped
    step = planner.plan(m, HELD, [WEB], [zero_budget("web", labels={"app": "web"})], NOW)
    assert [(r.name, r.escalation, r.grace) for r in step.removals] == [("web-0", Action.DELETE_PODS, None)]
    said = {c["type"]: (c["status"], c["reason"], c["message"]) for c in step.status["conditions"]}
    assert said["EscalationCapped"] == CAPPED_AT_DELETE


def test_a_cap_lifted_says_the_ladder_is_no_longer_capped() -> None:
    stored = {"conditions": [{"type": "EscalationCapped", "status": "True", "reason": "CappedByPolicy", "message": CAPPED_AT_NONE[2]}]}
    assert capped(under({"escalation": BOTH}, stored=stored)) == ("False", "NotCapped", "no policy drops a step of the escalation ladder")
    assert capped(under({"escalation": BOTH})) is None  # never capped: nothing to say


def test_escalation_never_deletes_a_pod_a_wait_completed_rule_covers() -> None:
    # Past both steps, under a budget that allows nothing: the batch pod is left to complete, the web pod escalated.
    m = under({"escalation": BOTH}, drainRules=WAIT_FOR_BATCH)
    budgets = [zero_budget("web", labels={"app": "web"}), zero_budget("batch", labels={"app": "batch"})]
    step = planner.plan(m, HELD, [BATCH, WEB], budgets, NOW + datetime.timedelta(seconds=600))
    assert [(r.name, r.escalation) for r in step.removals] == [("web-0", Action.FORCE_DELETE_PODS)]
    assert "batch-0 is left to complete by itself" in step.status["lastError"]


def test_plan_escalation_shows_the_ladder_as_the_governing_policy_caps_it() -> None:
    budgets = [zero_budget("web", labels={"app": "web"}), zero_budget("batch", labels={"app": "batch"})]
    body = nm(drain={"escalation": BOTH}, status={"drainStartTime": ago(10)})
    policy = plan.governing(HELD, [nm_policy("rolling", drain={"maxEscalation": "DeletePods"}, drainRules=WAIT_FOR_BATCH)])
    shown = plan.escalation(body, [BATCH, WEB], budgets, None, NOW, policy=policy)
    # Capped at DeletePods, and the pod the WaitCompleted rule covers is never named.
    assert [(step["action"], [p["name"] for p in step["pods"]]) for step in shown] == [("DeletePods", ["web-0"])]
    inherited = plan.escalation(nm(), [WEB], budgets, None, NOW, policy=model.Policy.of(nm_policy(drain={"maxEscalation": "None", "escalation": BOTH})))
    assert inherited == []
    # A policy that does not select the node, or two that do, govern nothing here.
    assert plan.governing(HELD, [nm_policy("elsewhere", node_selector={"matchLabels": {"pool": "b"}})]) is None
    assert plan.governing(HELD, [nm_policy("a"), nm_policy("b")]) is None

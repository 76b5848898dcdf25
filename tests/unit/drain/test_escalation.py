"""The escalation ladder and onTimeout HandBack: what a drain that does not finish deletes, when, and how a
timed-out maintenance gives its node back and ends; the policies' decision, the executor and kubectl nm plan
read the same."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.drain import status as st
from node_maintenance.drain.handback import hand_back
from node_maintenance.drain.planner import DELETE_PODS, FORCE_DELETE_PODS, HAND_BACK, Attempt, Escalation, Maintenance, Plan, plan
from node_maintenance.policy import line, model, terms
from node_maintenance.policy.verdicts import VerdictKind
from node_maintenance_cli import main as cli_main
from node_maintenance_cli import plan as planning
from node_maintenance_cli import views
from tests.unit.builders import HELD, NOW, RUNNING, ago, budget, maintenance, nm, nm_policy, node, scene_node, scene_pod, seen

zero_budget = partial(budget, "web", namespace="app", generation=2, resource_version="1", labels={"app": "web"}, observed=2,
                      healthy=1, desired=1, expected=1, allowed=0)
WEB = scene_pod("web-0", labels={"app": "web"})
LADDER = (Escalation(30, DELETE_PODS), Escalation(60, FORCE_DELETE_PODS))


def started(seconds_ago: int, **status: Any) -> dict[str, Any]:
    return {**RUNNING, "drainStartTime": ago(seconds_ago), **status}


def escalated(result: Plan) -> list[tuple[str, str, int | None, str | None]]:
    return [(r.name, r.escalation, r.grace, r.bypassed) for r in result.removals if r.escalation]


# ------------------------------------------------------------------ the ladder


def test_nothing_is_deleted_before_the_first_step_and_the_drain_wakes_at_its_time() -> None:
    result = plan(maintenance(started(10), escalation=LADDER), HELD, [WEB], [zero_budget()], NOW)
    assert result.removals == () and "escalatedPods" not in result.status
    assert result.recheck_in == pytest.approx(20)


def test_delete_pods_deletes_the_blocked_pod_bypassing_its_budget_and_names_it_once() -> None:
    result = plan(maintenance(started(30), escalation=LADDER), HELD, [WEB], [zero_budget()], NOW)
    assert escalated(result) == [("web-0", DELETE_PODS, None, "app/web")]
    assert result.removals[0].delete and result.removals[0].budget is None  # a deletion: the budget is not asked
    assert result.status["escalatedPods"] == [
        {"namespace": "app", "name": "web-0", "action": DELETE_PODS, "budget": "app/web", "time": ago(0)}]
    told = [(e.pod, e.reason, e.message) for e in result.events]
    message = "pod app/web-0 deleted by escalation DeletePods 30s after the drain started, bypassing PodDisruptionBudget app/web"
    assert told == [(None, DELETE_PODS, message), (("app", "web-0", "uid-web-0"), DELETE_PODS, message)]
    assert result.recheck_in == pytest.approx(30)  # the next step
    again = plan(maintenance(result.status, escalation=LADDER), HELD, [WEB], [zero_budget()], NOW + datetime.timedelta(seconds=5))
    assert again.removals == () and again.events == () and again.status["escalatedPods"] == result.status["escalatedPods"]


def test_delete_pods_takes_the_drains_grace_and_leaves_terminating_pods_to_force() -> None:
    leaving = scene_pod("leaving", labels={"app": "web"}, deleted_at=ago(20))
    result = plan(maintenance(started(30), escalation=LADDER, grace=7), HELD, [WEB, leaving], [zero_budget()], NOW)
    assert escalated(result) == [("web-0", DELETE_PODS, 7, "app/web")]


def test_force_delete_pods_uses_grace_0_for_every_pod_still_there_terminating_or_not() -> None:
    leaving = scene_pod("leaving", labels={"app": "web"}, deleted_at=ago(20))
    deleted_before = [{"namespace": "app", "name": "web-0", "action": DELETE_PODS, "budget": "app/web", "time": ago(30)}]
    status = started(60, escalatedPods=deleted_before)
    result = plan(maintenance(status, escalation=LADDER, grace=7), HELD, [WEB, leaving], [zero_budget()], NOW)
    assert escalated(result) == [("leaving", FORCE_DELETE_PODS, 0, "app/web"), ("web-0", FORCE_DELETE_PODS, 0, "app/web")]
    assert [(e["name"], e["action"]) for e in result.status["escalatedPods"]] == [
        ("web-0", DELETE_PODS), ("leaving", FORCE_DELETE_PODS), ("web-0", FORCE_DELETE_PODS)]
    assert "with grace period 0" in result.events[0].message


def test_mirror_and_daemonset_pods_are_never_escalated() -> None:
    mirror = scene_pod("static", owner=None, labels={"app": "web"}, annotations={"kubernetes.io/config.mirror": "x"})
    orphan = scene_pod("orphan", owner="DaemonSet", owner_name="gone", labels={"app": "web"})  # evicted, as kubectl drain --force
    result = plan(maintenance(started(61), escalation=LADDER), HELD, [mirror, orphan], [zero_budget()], NOW, daemonsets={"app/gone": False})
    assert result.removals == () and "orphan waits on PodDisruptionBudget app/web" in result.status["lastError"]


def test_a_pod_eviction_takes_now_is_evicted_not_escalated() -> None:
    result = plan(maintenance(started(30), escalation=LADDER), HELD, [scene_pod("bare", owner=None)], [], NOW)
    assert [(r.name, r.delete, r.escalation) for r in result.removals] == [("bare", False, "")]


def test_a_failed_escalated_deletion_is_tried_again_at_its_retry_time() -> None:
    status = started(40, escalatedPods=[{"namespace": "app", "name": "web-0", "action": DELETE_PODS, "time": ago(10)}])
    failed = {"uid-web-0": Attempt(NOW.timestamp() - 1, error="removal failed: boom", failures=1)}
    result = plan(maintenance(status, escalation=LADDER), HELD, [WEB], [zero_budget()], NOW, attempts=failed)
    assert escalated(result) == [("web-0", DELETE_PODS, None, "app/web")] and result.events == ()
    assert len(result.status["escalatedPods"]) == 1


def test_the_ladder_and_on_timeout_are_read_from_spec_drain() -> None:
    drain = {"escalation": [{"afterSeconds": 30, "action": DELETE_PODS}, {"afterSeconds": 60, "action": FORCE_DELETE_PODS}],
             "onTimeout": HAND_BACK}
    m = Maintenance.of(nm(drain=drain))
    assert m.escalation == LADDER and m.on_timeout == HAND_BACK
    assert Maintenance.of(nm()).on_timeout == "Fail" and Maintenance.of(nm()).escalation == ()
    policy = model.Policy.of(nm_policy(drain={"onTimeout": HAND_BACK, "escalation": drain["escalation"]}))
    defaulted = Maintenance.of(model.with_defaults(nm(drain={"timeoutSeconds": 5}), policy))
    assert defaulted.escalation == LADDER and defaulted.on_timeout == HAND_BACK and defaulted.timeout == 5


# ------------------------------------------------------------------ onTimeout HandBack


def test_hand_back_at_the_timeout_restores_the_node_and_ends_timed_out() -> None:
    m = maintenance(started(61), timeout=60, on_timeout=HAND_BACK, escalation=LADDER)
    result = plan(m, HELD, [WEB], [zero_budget()], NOW)
    assert result.handback == hand_back("nm", "n1", HELD, False)  # what a deletion would do, nothing else
    assert result.node_patch is None and result.removals == () and not result.holds_node and result.phase == st.FAILED
    timed_out = next(c for c in result.status["conditions"] if c["type"] == st.TIMED_OUT)
    assert (timed_out["status"], timed_out["reason"]) == ("True", st.HANDED_BACK)
    assert "given back as it was" in timed_out["message"] and "app/web-0" in timed_out["message"]
    assert [e.reason for e in result.events] == [st.TIMED_OUT]
    # Ended: at any later step, on the node given back, it does nothing at all.
    later = plan(maintenance(result.status, timeout=60, on_timeout=HAND_BACK, escalation=LADDER), scene_node(), [WEB], [zero_budget()],
                 NOW + datetime.timedelta(seconds=120))
    assert later == Plan(st.FAILED, result.status)


def test_fail_at_the_timeout_stays_the_default() -> None:
    result = plan(maintenance(started(61), timeout=60), HELD, [WEB], [zero_budget()], NOW)
    assert result.handback is None and result.holds_node and "stays cordoned" in result.status["lastError"]
    assert not st.timed_out(result.status)


def test_a_timed_out_maintenance_holds_no_slot_and_waits_in_no_line() -> None:
    pool = partial(node, labels={"pool": "a"}, annotations={}, unschedulable=False, ready=True)
    ended = nm("ended", "n0", created="2026-01-01T10:00:00Z", status={"conditions": [
        {"type": st.TIMED_OUT, "status": "True", "reason": st.HANDED_BACK, "message": "m"}]})
    nms = [ended, nm("next", "n1", created="2026-01-01T10:00:01Z")]
    policy = model.Policy.of(nm_policy(node_selector={"matchLabels": {"pool": "a"}}, maxParallel=1))
    decision = line.decide([policy], [model.slim_node(pool("n0")), model.slim_node(pool("n1"))], [model.slim_maintenance(m) for m in nms], now=NOW)
    assert "ended" not in decision.verdicts and decision.verdicts["next"].kind == VerdictKind.ADMITTED
    assert decision.summaries["p"].queue == ()
    # Its node's policy has no word on it any more: a drain step under the policy holds, and takes nothing.
    held = terms.maintenance(ended, seen(pool("n0"), decision.verdicts.get("ended")), {}, NOW)
    assert held.terms.undecided and held.terms.waiting is None


# ------------------------------------------------------------------ kubectl nm plan --escalation


def test_plan_escalation_names_the_pods_each_step_would_delete_and_when() -> None:
    body = nm(drain={"escalation": [{"afterSeconds": 30, "action": DELETE_PODS}, {"afterSeconds": 60, "action": FORCE_DELETE_PODS}]},
              status={"drainStartTime": ago(10)})
    ladder = planning.escalation(body, [WEB, scene_pod("bare", owner=None)], [zero_budget()], None, NOW)
    assert ladder == [
        {"action": DELETE_PODS, "afterSeconds": 30, "at": ago(-20),
         "pods": [{"namespace": "app", "name": "web-0", "gracePeriodSeconds": None, "budget": "app/web"}]},
        {"action": FORCE_DELETE_PODS, "afterSeconds": 60, "at": ago(-50),
         "pods": [{"namespace": "app", "name": "web-0", "gracePeriodSeconds": 0, "budget": "app/web"}]},
    ]
    would_be = planning.escalation(nm(drain={"escalation": [{"afterSeconds": 30, "action": DELETE_PODS}]}), [WEB], [zero_budget()], None, NOW)
    assert would_be[0]["at"] is None and [p["name"] for p in would_be[0]["pods"]] == ["web-0"]
    document = {**planning.build("n1", [WEB], [zero_budget()], [WEB]), "escalation": ladder}
    out = views.Console(width=200, record=True, force_terminal=False)
    out.print(views.plan_view(document))
    text = out.export_text()
    lines = [line.split() for line in text.splitlines()]
    assert ["DeletePods", ago(-20), "app/web-0", "the", "pod's", "own", "app/web"] in lines
    assert ["ForceDeletePods", ago(-50), "app/web-0", "0s", "app/web"] in lines


def test_plan_escalation_reads_steps_from_the_command_line() -> None:
    args = cli_main.build_parser().parse_args(["plan", "n1", "--escalation", "5m:DeletePods,10m:ForceDeletePods"])
    assert args.escalation == [{"afterSeconds": 300, "action": DELETE_PODS}, {"afterSeconds": 600, "action": FORCE_DELETE_PODS}]
    assert cli_main.build_parser().parse_args(["plan", "n1", "--escalation"]).escalation == []
    assert cli_main.build_parser().parse_args(["plan", "n1"]).escalation is None
    with pytest.raises(SystemExit):
        cli_main.build_parser().parse_args(["plan", "n1", "--escalation", "5m:Evict"])

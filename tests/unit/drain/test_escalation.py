"""The escalation ladder and onTimeout HandBack: what a drain that does not finish deletes, when, and how a
timed-out maintenance gives its node back and ends, one row per behaviour (as in test_planner.py); the ladder as
spec.drain holds it, the policies' decision, the executor and kubectl nm plan read the same."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.coordination import remediation
from node_maintenance.drain import events, status
from node_maintenance.drain.handback import hand_back
from node_maintenance.drain.plans import Action, Attempt, Escalation, Maintenance, OnTimeout
from node_maintenance.drain.rules import Rule
from node_maintenance.policy import line, model, terms
from node_maintenance.policy.verdicts import VerdictKind
from node_maintenance_cli import main, plan, views
from tests.unit.builders import (
    HELD,
    NOW,
    RUNNING,
    Again,
    Scene,
    Text,
    again,
    ago,
    budget,
    held_node,
    maintenance,
    nm,
    nm_policy,
    node,
    outcomes,
    policy_terms,
    row,
    scene,
    scene_node,
    scene_pod,
    scene_removal,
    seen_by_policies,
    shows,
)

WARNING = events.Type.WARNING
DELETE_PODS, FORCE_DELETE_PODS = Action.DELETE_PODS, Action.FORCE_DELETE_PODS
zero_budget = partial(budget, "web", namespace="app", generation=2, resource_version="1", labels={"app": "web"}, observed=2,
                      healthy=1, desired=1, expected=1, allowed=0)
WEB = scene_pod("web-0", labels={"app": "web"})
LEAVING = scene_pod("leaving", labels={"app": "web"}, deleted_at=ago(20))
LADDER = (Escalation(after=30, action=DELETE_PODS), Escalation(after=60, action=FORCE_DELETE_PODS))


def started(seconds_ago: int, **stored: Any) -> dict[str, Any]:
    """The status of a drain that took its node ``seconds_ago``."""
    return {**RUNNING, "drainStartTime": ago(seconds_ago), **stored}


DELETED = "pod app/web-0 deleted by escalation DeletePods 30s after the drain started, bypassing PodDisruptionBudget app/web"
BATCH = Rule.of({"podSelector": {"matchLabels": {"app": "batch"}}, "behavior": "WaitCompleted"})
LAST = Rule.of({"podSelector": {"matchLabels": {"app": "db"}}, "order": 10})
KEEP = Rule.of({"podSelector": {"matchLabels": {"app": "keep"}}, "behavior": "Skip"})
BATCH_0, DB_0 = scene_pod("batch-0", labels={"app": "batch"}), scene_pod("db-0", labels={"app": "db"})
MISSPELT = scene_pod("misspelt-0", annotations={"nodemaintenance.kubevirt.io/drain": "skp"})
DB_BUDGET = budget("db", namespace="app", generation=2, resource_version="1", labels={"app": "db"}, observed=2, healthy=1, desired=1,
                   expected=1, allowed=0)
LADDER_ROWS = [
    row("nothing is deleted before the first step, and the drain wakes at its time",
        (scene(maintenance(started(10), escalation=LADDER), pods=[WEB], budgets=[zero_budget()]),
         shows(removals=(), escalated_pods=None, recheck=pytest.approx(20)))),
    row("DeletePods deletes the blocked pod, bypassing its budget, and names it once",
        # A deletion: the budget is not asked. The drain wakes again at the next step.
        (scene(maintenance(started(30), escalation=LADDER), pods=[WEB], budgets=[zero_budget()]),
         shows(escalated=[("web-0", DELETE_PODS, None, "app/web")], recheck=pytest.approx(30),
               removals=(scene_removal("web-0", delete=True, escalation=DELETE_PODS, bypassed=("app/web",)),),
               escalated_pods=[{"namespace": "app", "name": "web-0", "action": DELETE_PODS, "budget": "app/web", "time": ago(0)}],
               told=[(None, DELETE_PODS, DELETED), (("app", "web-0", "uid-web-0"), DELETE_PODS, DELETED)])),
        (again(now=NOW + datetime.timedelta(seconds=5)),
         shows(removals=(), events=[],
               escalated_pods=[{"namespace": "app", "name": "web-0", "action": DELETE_PODS, "budget": "app/web", "time": ago(0)}]))),
    row("DeletePods takes the drain's grace period and leaves terminating pods to ForceDeletePods",
        (scene(maintenance(started(30), escalation=LADDER, grace=7), pods=[WEB, LEAVING], budgets=[zero_budget()]),
         shows(escalated=[("web-0", DELETE_PODS, 7, "app/web")]))),
    row("ForceDeletePods uses grace period 0 for every pod still there, terminating or not",
        (scene(maintenance(started(60, escalatedPods=[{"namespace": "app", "name": "web-0", "action": DELETE_PODS, "budget": "app/web",
                                                       "time": ago(30)}]), escalation=LADDER, grace=7),
               pods=[WEB, LEAVING], budgets=[zero_budget()]),
         shows(escalated=[("leaving", FORCE_DELETE_PODS, 0, "app/web"), ("web-0", FORCE_DELETE_PODS, 0, "app/web")],
               escalated_names=[("web-0", DELETE_PODS), ("leaving", FORCE_DELETE_PODS), ("web-0", FORCE_DELETE_PODS)],
               messages=[Text("with grace period 0")] * 4))),
    row("mirror and DaemonSet pods are never escalated",
        # The orphan is evicted, as kubectl drain --force does, and its budget holds it.
        (scene(maintenance(started(61), escalation=LADDER), budgets=[zero_budget()], daemonsets={"app/gone": False},
               pods=[scene_pod("static", owner=None, labels={"app": "web"}, annotations={"kubernetes.io/config.mirror": "x"}),
                     scene_pod("orphan", owner="DaemonSet", owner_name="gone", labels={"app": "web"})]),
         shows(removals=(), error=Text("orphan waits on PodDisruptionBudget app/web")))),
    row("a pod eviction takes now is evicted, not escalated",
        (scene(maintenance(started(30), escalation=LADDER), pods=[scene_pod("bare", owner=None)]), shows(removals=(scene_removal("bare"),)))),
    row("a failed escalated deletion is tried again at its retry time",
        (scene(maintenance(started(40, escalatedPods=[{"namespace": "app", "name": "web-0", "action": DELETE_PODS, "time": ago(10)}]),
                           escalation=LADDER), pods=[WEB], budgets=[zero_budget()],
               attempts={"uid-web-0": Attempt(not_before=NOW.timestamp() - 1, error="removal failed: boom", failures=1)}),
         shows(escalated=[("web-0", DELETE_PODS, None, "app/web")], events=[], escalated_names=[("web-0", DELETE_PODS)]))),
    row("pods the drain rules keep, wait for or hold for a later order are never escalated",
        # The ladder bypasses budgets, not the rules: a Skip pod stays, a WaitCompleted one and one whose annotation is
        # neither skip nor wait-completed are left alone, at every step; a later order's pod waits for its turn.
        (scene(maintenance(started(61), escalation=LADDER, terms=policy_terms(rules=(BATCH, LAST, KEEP))),
               pods=[BATCH_0, DB_0, scene_pod("keep-0", labels={"app": "keep"}), MISSPELT, WEB], budgets=[zero_budget()]),
         shows(escalated=[("web-0", FORCE_DELETE_PODS, 0, "app/web")], escalated_names=[("web-0", FORCE_DELETE_PODS)],
               error=Text("batch-0 is left to complete by itself", "'skp' is neither skip nor wait-completed"))),
        # Once web-0 is gone, db-0's order comes, and with it the ladder, past its budget; the others are still left alone.
        (again(pods=[BATCH_0, DB_0, MISSPELT], budgets=[zero_budget(), DB_BUDGET],
               now=NOW + datetime.timedelta(seconds=5)),
         shows(escalated=[("db-0", FORCE_DELETE_PODS, 0, "app/db")], evicted=[]))),
    row("a later order's pod already terminating is not forced out before the earlier order's pods are gone",
        # Seed 895490158 of Windowed: db-0 left early (evicted while the restarted operator knew no policy, the policy
        # being replaced); the ladder's ForceDeletePods then hastened it with web-0 still on the node.
        (scene(maintenance(started(61), escalation=LADDER, terms=policy_terms(rules=(LAST,))),
               pods=[WEB, scene_pod("db-0", labels={"app": "db"}, deleted_at=ago(20))], budgets=[zero_budget()]),
         shows(escalated=[("web-0", FORCE_DELETE_PODS, 0, "app/web")], escalated_names=[("web-0", FORCE_DELETE_PODS)])),
        (again(pods=[scene_pod("db-0", labels={"app": "db"}, deleted_at=ago(20))], now=NOW + datetime.timedelta(seconds=5)),
         shows(escalated=[("db-0", FORCE_DELETE_PODS, 0, None)]))),
    row("the steps count from drainStartTime: time spent in the queue does not count",
        # Waiting for its slot for an hour, it takes its node now: the first step comes 30 s from now.
        (scene(maintenance({"phase": "Pending", "lastError": ""}, escalation=LADDER), node=scene_node(), pods=[WEB], budgets=[zero_budget()]),
         shows(started=ago(0), removals=(), recheck=pytest.approx(30)))),
    row("the steps count from drainStartTime: a preDrain Job's time does, once it has succeeded",
        (scene(maintenance(started(40), escalation=LADDER, terms=policy_terms(hold="preDrain Job nm-pre-drain-n1 is running")), pods=[WEB],
               budgets=[zero_budget()]), shows(removals=(), escalated_pods=None)),
        (again(terms=policy_terms()), shows(escalated=[("web-0", DELETE_PODS, None, "app/web")]))),
    row("a wall clock set forward brings no step sooner: the drain has run what this process counted",
        # An hour on the wall clock, ten seconds on the monotonic one (the date set forward since this process saw the drain).
        (scene(maintenance(started(3600), escalation=LADDER, counted=10.0), pods=[WEB], budgets=[zero_budget()]),
         shows(removals=(), escalated_pods=None, recheck=pytest.approx(20))),
        (again(counted=30.0), shows(escalated=[("web-0", DELETE_PODS, None, "app/web")]))),
    row("a wall clock set back makes the steps later, never sooner",
        (scene(maintenance(started(10), escalation=LADDER, counted=100.0), pods=[WEB], budgets=[zero_budget()]),
         shows(removals=(), escalated_pods=None, recheck=pytest.approx(20)))),
    row("a wall clock set forward does not time the drain out",
        (scene(maintenance(started(3600), timeout=60, on_timeout=OnTimeout.HAND_BACK, counted=10.0), pods=[WEB], budgets=[zero_budget()]),
         shows(handback=None, holds=True, timed_out=False, phase=status.Phase.RUNNING))),
    row("a timeoutSeconds shorter than the first step's afterSeconds ends the drain before the ladder starts",
        (scene(maintenance(started(25), timeout=20, escalation=LADDER), pods=[WEB], budgets=[zero_budget()]),
         shows(phase="Failed", removals=(), escalated_pods=None, error=Text(start="drain timed out after 20s")))),
]
HANDED_BACK = maintenance(started(61), timeout=60, on_timeout=OnTimeout.HAND_BACK, escalation=LADDER)
OURS = remediation.LeaseView("medik8s-leases", "n1", known=remediation.LeaseState("medik8s-leases", "n1"))
EXCLUDED = held_node(cordoned=True)
EXCLUDED["metadata"]["labels"] = {remediation.EXCLUDE_LABEL: "true"}
ON_TIMEOUT_ROWS = [
    row("HandBack at the timeout restores the node and ends the maintenance TimedOut",
        # What a deletion would do, nothing else: the pods stay, the node is not cordoned again.
        (scene(HANDED_BACK, pods=[WEB], budgets=[zero_budget()]),
         shows(handback=hand_back("nm", "n1", HELD, False), patch=None, removals=(), holds=False, phase=status.Phase.FAILED,
               conditions={"Drained": ("False", "MaintenanceFailed"), "DrainBlocked": ("True", "PodDisruptionBudgetTemporary"),
                          status.TIMED_OUT: ("True", status.HANDED_BACK)},
               condition_messages={"Drained": Text(), "DrainBlocked": Text(), status.TIMED_OUT: Text("given back as it was", "app/web-0")},
               events=[(False, WARNING, status.TIMED_OUT)])),
        # Ended: at any later step, on the node given back, it does nothing at all.
        (again(node=scene_node(), now=NOW + datetime.timedelta(seconds=120)), shows(nothing=True, phase=status.Phase.FAILED))),
    row("HandBack gives the node back exactly as it was, its remediation Lease let go",
        (scene(HANDED_BACK, node=EXCLUDED, pods=[WEB], budgets=[zero_budget()], lease=OURS),
         shows(handback=hand_back("nm", "n1", EXCLUDED, True), phase=status.Phase.FAILED, holds=False, lease_seen=None, claim=None))),
    row("Fail at the timeout stays the default",
        (scene(maintenance(started(61), timeout=60), pods=[WEB], budgets=[zero_budget()]),
         shows(handback=None, holds=True, error=Text("stays cordoned"), timed_out=False))),
]

# A drain that has succeeded is over for its timeout and its ladder: a pod bound to the node later (started two
# minutes ago, past any timeout or step below) is evicted through the Eviction API, its budget asked; the phase is
# Running while it leaves, and Succeeded again after.
LATE = scene_pod("late", owner=None)
LATE_ROWS = [
    row("a pod that lands after the drain succeeded never makes onTimeout HandBack give the node back",
        (scene(maintenance(started(120), timeout=60, on_timeout=OnTimeout.HAND_BACK)), shows(phase=status.Phase.SUCCEEDED, holds=True)),
        (again(pods=[LATE], now=NOW + datetime.timedelta(seconds=30)),
         shows(phase=status.Phase.RUNNING, holds=True, handback=None, timed_out=False, removals=(scene_removal("late"),),
               conditions={"Drained": ("False", "LatePods")}, recheck=None)),
        (again(pods=[], now=NOW + datetime.timedelta(seconds=40)),
         shows(phase=status.Phase.SUCCEEDED, holds=True, handback=None, conditions={"Drained": ("True", "Drained")}))),
    row("a pod that lands after the drain succeeded is evicted, and the maintenance does not turn Failed",
        (scene(maintenance(started(120), timeout=60)), shows(phase=status.Phase.SUCCEEDED)),
        (again(pods=[LATE]), shows(phase=status.Phase.RUNNING, holds=True, error="", removals=(scene_removal("late"),), events=[])),
        # Held by its policy meanwhile (a second policy selects the node), then let go: still no timeout.
        (again(terms=policy_terms(hold="a conflict", hold_failed=True)), shows(phase=status.Phase.FAILED, removals=(), error="a conflict")),
        (again(terms=policy_terms()), shows(phase=status.Phase.RUNNING, removals=(scene_removal("late"),),
                                             conditions={"Drained": ("False", "LatePods")})),
        (again(pods=[]), shows(phase=status.Phase.SUCCEEDED, events=[(False, events.Type.NORMAL, "SucceedMaintenance")]))),
    row("a pod that lands after the drain succeeded is never escalated: its budget paces it",
        (scene(maintenance(started(120), escalation=LADDER)), shows(phase=status.Phase.SUCCEEDED)),
        (again(pods=[WEB], budgets=[zero_budget()]),
         shows(phase=status.Phase.RUNNING, removals=(), escalated_pods=None, recheck=None,
               error="app/web-0 waits on PodDisruptionBudget app/web")),
        (again(budgets=[zero_budget(allowed=1, resource_version="2")]),
         shows(removals=(scene_removal("web-0", budget="app/web", budget_version="2"),), escalated_pods=None))),
]


@pytest.mark.parametrize("steps", [*LADDER_ROWS, *ON_TIMEOUT_ROWS, *LATE_ROWS])
def test_a_drain_that_does_not_finish(steps: list[tuple[Scene | Again, dict[str, Any]]]) -> None:
    for shown, expected in outcomes(steps):
        assert shown == expected


def test_the_ladder_and_on_timeout_are_read_from_spec_drain() -> None:
    drain = {"escalation": [{"afterSeconds": 30, "action": DELETE_PODS}, {"afterSeconds": 60, "action": FORCE_DELETE_PODS}],
             "onTimeout": OnTimeout.HAND_BACK}
    m = Maintenance.of(nm(drain=drain))
    assert m.escalation == LADDER and m.on_timeout == OnTimeout.HAND_BACK
    assert Maintenance.of(nm()).on_timeout == "Fail" and Maintenance.of(nm()).escalation == ()
    policy = model.Policy.of(nm_policy(drain={"onTimeout": OnTimeout.HAND_BACK, "escalation": drain["escalation"]}))
    defaulted = Maintenance.of(model.with_defaults(nm(drain={"timeoutSeconds": 5}), policy))
    assert defaulted.escalation == LADDER and defaulted.on_timeout == OnTimeout.HAND_BACK and defaulted.timeout == 5



def test_a_timed_out_maintenance_holds_no_slot_and_waits_in_no_line() -> None:
    pool = partial(node, labels={"pool": "a"}, annotations={}, unschedulable=False, ready=True)
    ended = nm("ended", "n0", created="2026-01-01T10:00:00Z", status={"conditions": [
        {"type": status.TIMED_OUT, "status": "True", "reason": status.HANDED_BACK, "message": "m"}]})
    nms = [ended, nm("next", "n1", created="2026-01-01T10:00:01Z")]
    policy = model.Policy.of(nm_policy(node_selector={"matchLabels": {"pool": "a"}}, maxParallel=1))
    decision = line.decide([policy], [model.slim_node(pool("n0")), model.slim_node(pool("n1"))], [model.slim_maintenance(m) for m in nms], now=NOW)
    assert "ended" not in decision.verdicts and decision.verdicts["next"].kind == VerdictKind.ADMITTED
    assert decision.summaries["p"].queue == ()
    # Its node's policy has no word on it any more: a drain step under the policy holds, and takes nothing.
    held = terms.maintenance(ended, seen_by_policies(pool("n0"), decision.verdicts.get("ended")), {}, NOW)
    assert held.terms.undecided and held.terms.waiting is None


# ------------------------------------------------------------------ kubectl nm plan --escalation


def test_plan_escalation_names_the_pods_each_step_would_delete_and_when() -> None:
    body = nm(drain={"escalation": [{"afterSeconds": 30, "action": DELETE_PODS}, {"afterSeconds": 60, "action": FORCE_DELETE_PODS}]},
              status={"drainStartTime": ago(10)})
    ladder = plan.escalation(body, [WEB, scene_pod("bare", owner=None)], [zero_budget()], None, NOW)
    assert ladder == [
        {"action": DELETE_PODS, "afterSeconds": 30, "at": ago(-20),
         "pods": [{"namespace": "app", "name": "web-0", "gracePeriodSeconds": None, "budget": "app/web"}]},
        {"action": FORCE_DELETE_PODS, "afterSeconds": 60, "at": ago(-50),
         "pods": [{"namespace": "app", "name": "web-0", "gracePeriodSeconds": 0, "budget": "app/web"}]},
    ]
    drained = plan.escalation({**body, "status": {"phase": status.Phase.SUCCEEDED, "drainStartTime": ago(10)}}, [WEB], [zero_budget()], None, NOW)
    assert [step["pods"] for step in drained] == [[], []]  # over once the drain has succeeded: a late pod is only evicted
    would_be = plan.escalation(nm(drain={"escalation": [{"afterSeconds": 30, "action": DELETE_PODS}]}), [WEB], [zero_budget()], None, NOW)
    assert would_be[0]["at"] is None and [p["name"] for p in would_be[0]["pods"]] == ["web-0"]
    document = {**plan.build("n1", [WEB], [zero_budget()], [WEB]), "escalation": ladder}
    out = views.Console(width=200, record=True, force_terminal=False)
    out.print(views.plan_view(document))
    text = out.export_text()
    lines = [line.split() for line in text.splitlines()]
    assert ["DeletePods", ago(-20), "app/web-0", "the", "pod's", "own", "app/web"] in lines
    assert ["ForceDeletePods", ago(-50), "app/web-0", "0s", "app/web"] in lines


def test_plan_escalation_reads_steps_from_the_command_line() -> None:
    args = main.build_parser().parse_args(["plan", "n1", "--escalation", "5m:DeletePods,10m:ForceDeletePods"])
    assert args.escalation == [{"afterSeconds": 300, "action": DELETE_PODS}, {"afterSeconds": 600, "action": FORCE_DELETE_PODS}]
    assert main.build_parser().parse_args(["plan", "n1", "--escalation"]).escalation == []
    assert main.build_parser().parse_args(["plan", "n1"]).escalation is None
    with pytest.raises(SystemExit):
        main.build_parser().parse_args(["plan", "n1", "--escalation", "5m:Evict"])

"""The etcd-quorum guard asked again before an escalated deletion on a control-plane node: while it refuses, no pod is
deleted by escalation, eviction goes on, and the QuorumGuard condition says why in the guard's own words; once it
allows, the step deletes as on any node. One row per behaviour (as in test_planner.py)."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.coordination import quorum
from node_maintenance.drain import escalation_guard, events, nodes
from node_maintenance.drain.plans import Action, Escalation
from node_maintenance.drain.taking import QUORUM_RECHECK_SECONDS
from tests.unit.builders import (
    NOW,
    RUNNING,
    Again,
    Scene,
    Text,
    again,
    ago,
    budget,
    control_plane_node,
    etcd_guard,
    maintenance,
    outcomes,
    row,
    scene,
    scene_pod,
    shows,
)

WARNING = events.Type.WARNING
LADDER = (Escalation(after=30, action=Action.DELETE_PODS), Escalation(after=60, action=Action.FORCE_DELETE_PODS))
# Control-plane node n1, which nm holds, and the two other members of its control plane.
N1 = control_plane_node("n1", uid="node-uid", resource_version="7", holder="nm", was_unschedulable=False, unschedulable=True,
                        taints=[nodes.TAINT])
OTHERS = (control_plane_node("m2"), control_plane_node("m3"))
zero_budget = partial(budget, "web", namespace="app", generation=2, resource_version="1", labels={"app": "web"}, observed=2,
                      healthy=1, desired=1, expected=1, allowed=0)
WEB, LONE = scene_pod("web-0", labels={"app": "web"}), scene_pod("lone-0")  # web-0 waits on its budget; lone-0 has none


def escalating(members: quorum.Members | None, *, node: dict[str, Any] = N1) -> Scene:
    """Forty seconds into the drain of ``node``: DeletePods is due for web-0, which its budget holds; lone-0 is evicted."""
    return scene(maintenance({**RUNNING, "drainStartTime": ago(40)}, escalation=LADDER), node=node, pods=[WEB, LONE],
                 budgets=[zero_budget()], members=members)


DRAINING = {"Drained": ("False", "Draining"), "DrainBlocked": ("True", "PodDisruptionBudgetTemporary")}  # web-0 waits on its budget
MESSAGES = {"Drained": "2 pod(s) still to leave the node", "DrainBlocked": Text("PodDisruptionBudget app/web")}
REFUSED_BY_GUARD = Text("escalation DeletePods deletes no pod, eviction goes on: node 'n1' is a control-plane node",
                        "etcd quorum guard PodDisruptionBudget openshift-etcd/etcd-guard-pdb", "disruptionsAllowed 0")
GUARD_ROWS = [
    row("the guard budget refusing, escalation deletes nothing on a control-plane node, eviction goes on, and the status says why",
        (escalating(quorum.Members((N1, *OTHERS), (etcd_guard(0),))),
         shows(escalated=[], evicted=["lone-0"], escalated_pods=None, recheck=QUORUM_RECHECK_SECONDS,
               conditions={**DRAINING, quorum.CONDITION: ("False", "WouldBreakEtcdQuorum")},
               condition_messages={**MESSAGES, quorum.CONDITION: REFUSED_BY_GUARD},
               events=[(False, WARNING, "WouldBreakEtcdQuorum")])),
        # Said once; looked at again as often as at takeover.
        (again(now=NOW + datetime.timedelta(seconds=5), pods=[WEB]),
         shows(escalated=[], events=[], recheck=QUORUM_RECHECK_SECONDS)),
        # Once the guard allows a disruption again, the due step deletes, and the condition says the guard allows it.
        (again(now=NOW + datetime.timedelta(seconds=26), members=quorum.Members((N1, *OTHERS), (etcd_guard(1),))),
         shows(escalated=[("web-0", Action.FORCE_DELETE_PODS, 0, "app/web")], conditions={
             **DRAINING, quorum.CONDITION: ("True", "EtcdQuorumKept")}))),
    row("counted without a guard budget, another control-plane node in maintenance refuses escalation",
        (escalating(quorum.Members((N1, control_plane_node("m2", annotations={nodes.HOLDER: "other"}), OTHERS[1]))),
         shows(escalated=[], evicted=["lone-0"], condition_messages={
             **MESSAGES,
             quorum.CONDITION: Text("escalation DeletePods deletes no pod", "taking it would leave 1, fewer than the majority of 2")}))),
    row("the guard allowing it, escalation deletes on a control-plane node as on any other",
        (escalating(quorum.Members((N1, *OTHERS), (etcd_guard(1),))),
         shows(escalated=[("web-0", Action.DELETE_PODS, None, "app/web")], evicted=["lone-0"],
               conditions={**DRAINING, quorum.CONDITION: ("True", "EtcdQuorumKept")}))),
    row("the control plane not read, escalation deletes nothing on a control-plane node",
        (escalating(None), shows(escalated=[], evicted=["lone-0"], conditions={
            **DRAINING, quorum.CONDITION: ("False", "WouldBreakEtcdQuorum")}))),
    row("a worker is never judged: no guard is asked, and the status says nothing of it",
        (escalating(None, node=control_plane_node("n1", labels={}, uid="node-uid", resource_version="7", holder="nm", was_unschedulable=False,
                                                  unschedulable=True, taints=[nodes.TAINT])),
         shows(escalated=[("web-0", Action.DELETE_PODS, None, "app/web")], conditions=DRAINING))),
]


@pytest.mark.parametrize("steps", GUARD_ROWS)
def test_escalation_on_a_control_plane_node_asks_the_quorum_guard(steps: list[tuple[Scene | Again, dict[str, Any]]]) -> None:
    for shown, expected in outcomes(steps):
        assert shown == expected


@pytest.mark.parametrize(("stored", "seconds", "ladder", "due"), [
    pytest.param({**RUNNING, "drainStartTime": ago(40)}, 0, LADDER, True, id="a step past its afterSeconds is due"),
    pytest.param({**RUNNING, "drainStartTime": ago(10)}, 0, LADDER, False, id="before the first step nothing is due"),
    pytest.param({**RUNNING, "drainStartTime": ago(40)}, 0, (), False, id="no ladder (or one a policy capped away), nothing is due"),
    pytest.param({"phase": "Pending"}, 0, LADDER, False, id="a drain not started has nothing due"),
    pytest.param({**RUNNING, "phase": "Succeeded", "drainStartTime": ago(400)}, 0, LADDER, False, id="a drained node is never escalated"),
])
def test_the_control_plane_is_read_for_the_guard_only_when_a_step_is_due(stored: dict[str, Any], seconds: int,
                                                                          ladder: tuple[Escalation, ...], due: bool) -> None:
    assert escalation_guard.due(maintenance(stored, escalation=ladder), NOW + datetime.timedelta(seconds=seconds)) is due

"""The etcd-quorum guard asked again before an escalated deletion on a control-plane node: while it refuses, no pod is
deleted by escalation, eviction goes on, and the QuorumGuard condition says why in the guard's own words; once it
allows, the step deletes as on any node, never an etcd guard pod. The node counts as the member going: its own guard pod
gone, the guard refuses only while another member is unhealthy. One row per behaviour (as in test_planner.py)."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.coordination import quorum
from node_maintenance.drain import escalation_guard, events, nodes
from node_maintenance.drain.plans import Action, Attempt, Escalation
from node_maintenance.drain.taking import QUORUM_RECHECK_SECONDS
from tests.unit.builders import (
    CLOCK,
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


def escalating(members: quorum.Members | None, *, node: dict[str, Any] = N1, pods: tuple[dict[str, Any], ...] = (WEB, LONE),
               guard: dict[str, Any] | None = None, seconds: int = 40, attempts: dict[str, Attempt] | None = None) -> Scene:
    """``seconds`` into the drain of ``node`` (forty: DeletePods is due, seventy: ForceDeletePods) for web-0, which its budget
    holds; lone-0 is evicted. ``guard``: the etcd guard budget among the budgets of the node's pods' namespaces."""
    return scene(maintenance({**RUNNING, "drainStartTime": ago(seconds)}, escalation=LADDER), node=node, pods=list(pods),
                 budgets=[zero_budget(), *([guard] if guard else [])], members=members, attempts=attempts or {})


def guarded(guard: dict[str, Any]) -> quorum.Members:
    """The control plane of n1 and its two Ready peers, under ``guard``."""
    return quorum.Members((N1, *OTHERS), (guard,))


def counted(*others: dict[str, Any], node: dict[str, Any] = N1) -> quorum.Members:
    """The control plane of ``node`` and ``others``, with no etcd guard budget: counted."""
    return quorum.Members((node, *others))


# The guard pod of n1's etcd member; the same, evicted and still terminating.
GUARD_POD = scene_pod("etcd-guard-n1", namespace="openshift-etcd", labels={"app": "guard"})
GUARD_LEAVING = scene_pod("etcd-guard-n1", namespace="openshift-etcd", labels={"app": "guard"}, deleted_at=ago(20))
UNREADY_N1 = control_plane_node("n1", ready=False, uid="node-uid", resource_version="7", holder="nm", was_unschedulable=False,
                                unschedulable=True, taints=[nodes.TAINT])
DRAINING = {"Drained": ("False", "Draining"), "DrainBlocked": ("True", "PodDisruptionBudgetTemporary")}  # web-0 waits on its budget
MESSAGES = {"Drained": "2 pod(s) still to leave the node", "DrainBlocked": Text("PodDisruptionBudget app/web")}
ALLOWED = {**DRAINING, quorum.CONDITION: ("True", "EtcdQuorumKept")}
REFUSED = {**DRAINING, quorum.CONDITION: ("False", "WouldBreakEtcdQuorum")}
DELETED = [("web-0", Action.DELETE_PODS, None, "app/web")]
REFUSED_BY_GUARD = Text("escalation DeletePods deletes no pod, eviction goes on: node 'n1' is a control-plane node",
                        "etcd quorum guard PodDisruptionBudget openshift-etcd/etcd-guard-pdb", "its guard pod is still on the node",
                        "disruptionsAllowed 0")
GUARD_ROWS = [
    row("the node's own guard pod still on it and the guard allowing no disruption, escalation deletes nothing, eviction goes on, "
        "and the status says why",
        (escalating(guarded(etcd_guard(0)), pods=(WEB, LONE, GUARD_POD), guard=etcd_guard(0)),
         shows(escalated=[], evicted=["lone-0"], escalated_pods=None, recheck=QUORUM_RECHECK_SECONDS,
               conditions=REFUSED,
               condition_messages={**MESSAGES, quorum.CONDITION: REFUSED_BY_GUARD, "Drained": "3 pod(s) still to leave the node"},
               events=[(False, WARNING, "WouldBreakEtcdQuorum")])),
        # Said once; looked at again as often as at takeover.
        (again(now=NOW + datetime.timedelta(seconds=5), pods=[WEB, GUARD_POD]),
         shows(escalated=[], events=[], recheck=QUORUM_RECHECK_SECONDS)),
        # Once the guard allows a disruption, the guard pod is evicted, paced by it, and the due step deletes web-0 alone.
        (again(now=NOW + datetime.timedelta(seconds=26), members=guarded(etcd_guard(1)), budgets=[zero_budget(), etcd_guard(1)]),
         shows(escalated=[("web-0", Action.FORCE_DELETE_PODS, 0, "app/web")], evicted=["etcd-guard-n1"],
               conditions=ALLOWED))),
    row("the node's own guard pod evicted and every other member healthy (currentHealthy == desiredHealthy), escalation deletes, "
        "though the guard allows no further disruption",
        (escalating(guarded(etcd_guard(0))), shows(escalated=DELETED, evicted=["lone-0"], conditions=ALLOWED))),
    row("the node's own guard pod evicted and another member unhealthy (currentHealthy < desiredHealthy), escalation deletes nothing",
        (escalating(guarded(etcd_guard(0, healthy=1))),
         shows(escalated=[], evicted=["lone-0"], conditions=REFUSED, condition_messages={**MESSAGES, quorum.CONDITION: Text(
             "escalation DeletePods deletes no pod", "openshift-etcd/etcd-guard-pdb", "currentHealthy 1", "desiredHealthy 2")}))),
    row("the node's own guard pod terminating counts as gone: ForceDeletePods deletes web-0, never the guard pod, which its "
        "budget alone paces",
        (escalating(guarded(etcd_guard(0)), pods=(WEB, LONE, GUARD_LEAVING), guard=etcd_guard(0), seconds=70),
         shows(escalated=[("web-0", Action.FORCE_DELETE_PODS, 0, "app/web")], conditions=ALLOWED))),
    row("the guard allowing a disruption its guard pod cannot take yet (refused at this budget version), escalation deletes web-0, "
        "never the guard pod",
        (escalating(guarded(etcd_guard(1)), pods=(WEB, LONE, GUARD_POD), guard=etcd_guard(1),
                    attempts={"uid-etcd-guard-n1": Attempt(not_before=CLOCK + 30, refused_by=(("openshift-etcd/etcd-guard-pdb", ""),))}),
         shows(escalated=DELETED, evicted=["lone-0"], conditions=ALLOWED))),
    row("counted without a guard budget, the node held and its two peers Ready, escalation deletes",
        (escalating(counted(*OTHERS)), shows(escalated=DELETED, evicted=["lone-0"], conditions=ALLOWED))),
    row("counted without a guard budget, one of its two peers unready, escalation deletes nothing",
        (escalating(counted(OTHERS[0], control_plane_node("m3", ready=False))),
         shows(escalated=[], evicted=["lone-0"], conditions=REFUSED, condition_messages={**MESSAGES, quorum.CONDITION: Text(
             "escalation DeletePods deletes no pod", "1 of the other 2 control-plane nodes", "majority of 2")}))),
    row("counted without a guard budget, the node itself unready counts as going all the same: with a peer unready, nothing",
        (escalating(counted(OTHERS[0], control_plane_node("m3", ready=False), node=UNREADY_N1), node=UNREADY_N1),
         shows(escalated=[], conditions=REFUSED))),
    row("counted without a guard budget, the node itself unready and its peers Ready, escalation deletes",
        (escalating(counted(*OTHERS, node=UNREADY_N1), node=UNREADY_N1), shows(escalated=DELETED, conditions=ALLOWED))),
    row("counted without a guard budget, another control-plane node in maintenance refuses escalation",
        (escalating(counted(control_plane_node("m2", annotations={nodes.HOLDER: "other"}), OTHERS[1])),
         shows(escalated=[], evicted=["lone-0"], condition_messages={**MESSAGES, quorum.CONDITION: Text(
             "escalation DeletePods deletes no pod", "1 of the other 2 control-plane nodes", "majority of 2")}))),
    row("the control plane not read, escalation deletes nothing on a control-plane node",
        (escalating(None), shows(escalated=[], evicted=["lone-0"], conditions=REFUSED))),
    row("a worker is never judged: no guard is asked, and the status says nothing of it",
        (escalating(None, node=control_plane_node("n1", labels={}, uid="node-uid", resource_version="7", holder="nm", was_unschedulable=False,
                                                  unschedulable=True, taints=[nodes.TAINT])),
         shows(escalated=DELETED, conditions=DRAINING))),
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

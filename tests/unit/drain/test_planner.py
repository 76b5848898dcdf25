"""The drain planner, one row per behaviour, without a cluster: what a drain step patches, removes, reports and posts,
from taking the node (also when a remediation Lease or the etcd-quorum guard holds it back) to draining it under a
policy's terms.

Each row is a named behaviour: one or more steps, a ``scene`` (or ``again``, the step after, from the status the one
before left) with what the row reads of its plan (``READS`` in the builders: ``phase``, ``removals``, ``error``…).
The escalation ladder and onTimeout have their table in test_escalation.py."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.api.conditions import Condition
from node_maintenance.coordination import quorum, remediation
from node_maintenance.drain import events, nodes, pods
from node_maintenance.drain.budgets import InFlight
from node_maintenance.drain.planner import plan
from node_maintenance.drain.plans import Attempt, Maintenance, Plan
from node_maintenance.drain.rules import ANNOTATION
from node_maintenance.drain.taking import NODE_HELD_RECHECK_SECONDS, QUORUM_RECHECK_SECONDS
from tests.unit.builders import (
    CLOCK,
    HELD,
    NOW,
    RUNNING,
    STAMP,
    Again,
    Scene,
    Text,
    again,
    ago,
    budget,
    control_plane_node,
    held_node,
    lease,
    maintenance,
    outcomes,
    policy_terms,
    row,
    scene,
    scene_node,
    scene_pod,
    scene_removal,
    shows,
    worker_1,
)

NORMAL, WARNING = events.Type.NORMAL, events.Type.WARNING
a_budget = partial(budget, namespace="app", generation=2, resource_version="1", labels={"app": "web"}, observed=2,
                   healthy=3, desired=3, expected=3)
WEB = [scene_pod(f"web-{i}", labels={"app": "web"}) for i in range(5)]
LATER = datetime.timedelta(seconds=5)


def waiting(*names: str) -> str:
    """lastError of the scene's pods ``names`` waiting on budget app/web."""
    return "; ".join(f"app/{name} waits on PodDisruptionBudget app/web" for name in names)


# ------------------------------------------------------------------ taking the node
TAKING = [
    row("a missing node fails and waits for the node watch",
        (scene(node=None), shows(phase="Failed", holds=False, patch=None, progress=0, started=None, recheck=None,  # the node watch reports it
                                 error="node 'n1' not found; the maintenance starts when a node of that name exists",
                                 events=[(False, WARNING, "FailedMaintenance")]))),
    row("a node another maintenance holds fails without being touched",
        (scene(node=held_node("other", cordoned=True), pods=[scene_pod("p")], holder_exists=True),
         shows(phase="Failed", patch=None, removals=(), holds=False, recheck=NODE_HELD_RECHECK_SECONDS,
               error=Text("already in maintenance by NodeMaintenance other")))),
    row("the same failure is announced once",
        (scene(node=None), shows(events=[(False, WARNING, "FailedMaintenance")])),
        (again(), shows(events=[]))),
    row("a node held by a deleted maintenance is taken over",
        (scene(node=held_node("gone", cordoned=True), holder_exists=False), shows(holder="nm", phase="Succeeded"))),
    row("a fresh node is cordoned, tainted and announced on both objects",
        # The patch carries the node's resourceVersion: refused if the node changed meanwhile.
        (scene(node=scene_node()), shows(cordon=(True, [nodes.TAINT], "7"), holder="nm", started=STAMP, drained_after=0,
                                         events=[(False, NORMAL, "BeginMaintenance"), (True, NORMAL, "BeginMaintenance"),
                                                (False, NORMAL, "SucceedMaintenance")]))),
    row("a held node someone uncordoned is cordoned again without announcing",
        (scene(maintenance(RUNNING), node=held_node("nm", cordoned=False)),
         shows(cordon=(True, [nodes.TAINT], "7"), events=[(False, NORMAL, "SucceedMaintenance")]))),
    row("a held node is not patched again", (scene(maintenance(RUNNING)), shows(patch=None))),
]

# ------------------------------------------------------------------ which pods go, and how
MIXED = [scene_pod("web"), scene_pod("bare", owner=None), scene_pod("job", owner="Job", phase="Succeeded"), scene_pod("agent", owner="DaemonSet"),
         scene_pod("static", owner=None, annotations={"kubernetes.io/config.mirror": "x"})]
DAEMONS = [scene_pod("agent", owner="DaemonSet", owner_name="agent"), scene_pod("spent", owner="DaemonSet", owner_name="agent", phase="Succeeded"),
           scene_pod("crashed", owner="DaemonSet", owner_name="agent", phase="Failed"), scene_pod("orphan", owner="DaemonSet", owner_name="gone")]
UNKNOWN = [scene_pod("agent", owner="DaemonSet", owner_name="agent"), scene_pod("web")]
PODS = [
    row("a mixed node: evicted, finished pods deleted, DaemonSet and mirror pods kept",
        (scene(node=scene_node(), pods=MIXED), shows(evicted=["bare", "web"], deleted=["job"], phase="Running", totals=(5, 3),
                                                     pending=["bare", "job", "web"], progress=0))),
    row("DaemonSet pods go as kubectl drain --force removes them",
        # A finished DaemonSet pod is deleted and one whose DaemonSet is gone evicted; one whose DaemonSet exists stays.
        (scene(node=scene_node(), pods=DAEMONS, daemonsets={"app/agent": True, "app/gone": False}),
         shows(evicted=["orphan"], deleted=["crashed", "spent"], totals=(4, 3), pending=["crashed", "orphan", "spent"]))),
    row("a DaemonSet pod whose DaemonSet is unknown stays and is not counted",
        # When in doubt, hold: the DaemonSet's read failed, or it was not read yet.
        (scene(node=scene_node(), pods=UNKNOWN, daemonsets={}), shows(evicted=["web"], deleted=[], totals=(2, 1), pending=["web"])),
        (again(node=HELD, pods=UNKNOWN[:1], daemonsets=None), shows(phase="Succeeded", removals=(), pending=[]))),
    row("a DaemonSet pod found orphaned later is evicted then",
        (scene(maintenance({**RUNNING, "phase": "Succeeded"}), pods=[scene_pod("agent", owner="DaemonSet")]), shows(phase="Succeeded", removals=())),
        (again(daemonsets={"app/x": False}), shows(phase="Running", evicted=["agent"]))),
    row("the pod selector and the grace period reach the removals",
        (scene(maintenance(selector={"matchLabels": {"drain": "yes"}}, grace=3), node=scene_node(),
               pods=[scene_pod("a", labels={"drain": "yes"}), scene_pod("b", labels={"drain": "no"})]),
         shows(removals=(scene_removal("a", grace=3),), totals=(2, 1)))),
    row("terminating pods are waited for, not evicted again",
        (scene(maintenance(RUNNING), pods=[scene_pod("p", deleted_at=ago(1))]),
         shows(removals=(), phase="Running", pending=["p"], recheck=None))),  # the pod watch reports it gone
    row("an accepted eviction is not sent again while the pod watch catches up",
        (scene(maintenance(RUNNING), pods=[scene_pod("p")], attempts={"uid-p": Attempt(not_before=CLOCK + 30, accepted=True)}),
         shows(removals=(), recheck=pytest.approx(30)))),
    row("totals and the drain's start survive a restart",
        (scene(maintenance(RUNNING), pods=[scene_pod("p")]), shows(totals=(3, 3), started=ago(10), progress=67))),
    row("all gone: the drain succeeds once",
        (scene(maintenance(RUNNING), pods=[scene_pod("agent", owner="DaemonSet")]),
         shows(phase="Succeeded", error="", progress=100, events=[(False, NORMAL, "SucceedMaintenance")], drained_after=10,
               conditions={"Drained": ("True", "Drained")})),
        (again(pods=[]), shows(events=[], drained_after=None, recheck=None))),
    row("a late pod on a drained node is evicted",
        (scene(maintenance({**RUNNING, "phase": "Succeeded"}), pods=[scene_pod("late")]), shows(phase="Running", evicted=["late"]))),
    row("a replaced pod is a new pod",
        # A replacement that reuses the name has a new uid: the old pod's attempt does not hold it back.
        (scene(maintenance(RUNNING), pods=[scene_pod("db-0")], attempts={"uid-old": Attempt(not_before=CLOCK + 30, accepted=True)}),
         shows(removals=(scene_removal("db-0"),)))),
]

# ------------------------------------------------------------------ budgets pace the evictions
PACED = [
    # The budget watch says when it allows more; evictions in flight stop counting at a known time.
    row(f"no more evictions than the budget allows now: {allowed} allowed, {flying} in flight",
        (scene(maintenance(RUNNING), pods=WEB, budgets=[a_budget("web", allowed=allowed)],
               in_flight={"app/web": InFlight(count=flying, expires_in=7.5)} if flying else {}),
         shows(paced=[("app/web", "1")] * sent, error=waiting(*(f"web-{i}" for i in range(sent, 5))),
               recheck=7.5 if flying and sent < 5 else None)))
    for allowed, flying, sent in [(0, 0, 0), (1, 0, 1), (2, 0, 2), (5, 0, 5), (9, 0, 5), (2, 1, 1), (2, 2, 0), (1, 3, 0)]
]
LET_PAST = [
    (scene_pod("p", labels={"app": "web"}, phase="Pending"), a_budget("web", allowed=0), True, "a pod not running yet"),
    (scene_pod("p", labels={"app": "web"}, ready=False), a_budget("web", allowed=0, unhealthyPodEvictionPolicy="AlwaysAllow"), True,
     "an unhealthy pod under AlwaysAllow"),
    (scene_pod("p", labels={"app": "web"}, ready=False), a_budget("web", allowed=0), True, "an unhealthy pod the budget is healthy enough without"),
    (scene_pod("p", labels={"app": "web"}, ready=True), a_budget("web", allowed=0), False, "a healthy pod"),
]
BUDGETS = [
    *PACED,
    row("an eviction whose answer was lost holds the budget only until it expires",
        # The budget allows one, and one eviction was sent whose acceptance no event has shown (its answer lost to a
        # broken connection): the drain waits, and looks again when that eviction stops counting.
        (scene(maintenance(RUNNING), pods=WEB, budgets=[a_budget("web", allowed=1)], in_flight={"app/web": InFlight(count=1, expires_in=3.0)}),
         shows(removals=(), recheck=3.0)),
        (again(status=RUNNING, in_flight={}), shows(paced=[("app/web", "1")]))),
    row("pods without a budget go at once beside paced ones",
        (scene(maintenance(RUNNING), pods=[*WEB, scene_pod("bare", owner=None), scene_pod("other", labels={"app": "other"})],
               budgets=[a_budget("web", allowed=1)]), shows(evicted=["bare", "other", "web-0"]))),
    row("a budget in another namespace does not pace",
        (scene(maintenance(RUNNING), pods=WEB, budgets=[a_budget("web", allowed=0, namespace="elsewhere")]),
         shows(evicted=[f"web-{i}" for i in range(5)]))),
    row("a refused pod waits for the budget to change, not for a timer",
        (scene(maintenance(RUNNING), pods=WEB[:1], budgets=[a_budget("web", allowed=1, resource_version="1")],
               attempts={"uid-web-0": Attempt(not_before=CLOCK, refused_by=(("app/web", "1"),), failures=1)}),
         shows(removals=(), error=waiting("web-0"), recheck=None)),
        (again(status=RUNNING, budgets=[a_budget("web", allowed=1, resource_version="2")]), shows(evicted=["web-0"]))),
    row("a budget not yet processed allows nothing",
        (scene(maintenance(RUNNING), pods=WEB, budgets=[a_budget("web", allowed=3, observed=1)]), shows(removals=()))),
    *(row(f"the Eviction API lets past a budget: {why}" if goes else f"the Eviction API holds {why} back",
          (scene(maintenance(RUNNING), pods=[pod], budgets=[pdb]), shows(evicted=["p"] if goes else [])))
      for pod, pdb, goes, why in LET_PAST),
    row("a drain stuck on a budget stays Running, says which pod waits on which budget, and deletes nothing",
        # docs/troubleshooting.md, a drain stuck on a PodDisruptionBudget: drainProgress short of 100, tried again when
        # the budget changes (no timer), never deleted without escalation, however long it waits.
        (scene(maintenance({**RUNNING, "drainStartTime": ago(86_400)}), pods=WEB[:1], budgets=[a_budget("web", allowed=0)]),
         shows(phase="Running", removals=(), progress=67, error=waiting("web-0"), recheck=None, holds=True))),
]

# ------------------------------------------------------------------ retries, failures, timeout
TIMED_OUT = {**RUNNING, "drainStartTime": ago(61)}
WAITED = {"phase": "Failed", "lastError": "node 'n1' not found; ...", "totalpods": 0, "evictionPods": 0}
RETRIES = [
    row("a pod waiting on its retry time is tried then, its error shown",
        (scene(maintenance(RUNNING), pods=[scene_pod("bare", owner=None)],
               attempts={"uid-bare": Attempt(not_before=CLOCK + 4, error="removal failed: Forbidden (403)", failures=2)}),
         shows(removals=(), recheck=pytest.approx(4), error="app/bare: removal failed: Forbidden (403)")),
        (again(status=RUNNING, now=NOW + LATER), shows(evicted=["bare"]))),
    row("the timeout fails, stops evicting and keeps the node",
        (scene(maintenance(TIMED_OUT, timeout=60), pods=WEB[:1], budgets=[a_budget("web", allowed=0)]),
         shows(phase="Failed", removals=(), holds=True, patch=None, events=[(False, WARNING, "FailedMaintenance")],
               error=Text("waits on PodDisruptionBudget app/web", "stays cordoned", start="drain timed out after 60s with pods left: app/web-0"))),
        (again(), shows(events=[]))),
    row("a timed-out drain succeeds if the pods leave after all",
        (scene(maintenance({**RUNNING, "phase": "Failed", "drainStartTime": ago(600)}, timeout=60)), shows(phase="Succeeded"))),
    row("the timeout counts from the drain's start, not from the maintenance's creation",
        # A maintenance that waited (its node missing) gets its whole timeout once it takes the node.
        (scene(maintenance(WAITED, timeout=60), node=scene_node(), pods=WEB[:1], budgets=[a_budget("web", allowed=0)]),
         shows(phase="Running", started=STAMP, recheck=pytest.approx(61))),  # looks again when the timeout is due
        (again(node=HELD, now=NOW + datetime.timedelta(seconds=59)), shows(phase="Running"))),
    row("the status carries what a user reads",
        (scene(maintenance(RUNNING, timeout=0), pods=WEB[:2], budgets=[a_budget("web", allowed=1)]),
         shows(phase="Running", pending=["web-0", "web-1"], error=waiting("web-1"), conditions={"Drained": ("False", "Draining")}, updated=STAMP,
               pending_refs=[{"namespace": "app", "name": "web-0"}, {"namespace": "app", "name": "web-1"}]))),
]

# ------------------------------------------------------------------ a remediation Lease on the node; the quorum guard
LEASES = "medik8s-leases"
HELD_BY_OTHER = remediation.LeaseView(LEASES, "Worker-1", due=True, read=lease("NodeHealthCheck", 10))
OURS = remediation.LeaseState(LEASES, "Worker-1")
M1 = control_plane_node("m1", uid="u1", resource_version="1", annotations={})
M2_TAKEN = quorum.Members((M1, control_plane_node("m2", annotations={nodes.HOLDER: "other"}), control_plane_node("m3")))
COORDINATION = [
    row("another holder of the remediation Lease keeps the node untouched and says who, until it lets the Lease go",
        (scene(Maintenance(name="nm", node_name="Worker-1"), node=worker_1(unschedulable=False), lease=HELD_BY_OTHER),
         shows(phase="Failed", patch=None, holds=False, recheck=5, claim=None, lease_seen=("NodeHealthCheck", "False", "HeldByAnother"),
               error=Text("Lease medik8s-leases/node-worker-1 belongs to NodeHealthCheck"), events=[(False, WARNING, "FailedMaintenance")])),
        # Between reads, what the last one found still holds the node back.
        (again(lease=remediation.LeaseView(LEASES, "Worker-1", known=remediation.standing(HELD_BY_OTHER, worker_1(), NOW).seen)),
         shows(phase="Failed", patch=None, claim=None, holds=False)),
        # Once the holder lets it expire, the plan claims it and takes the node right after, in the same step.
        (again(lease=remediation.LeaseView(LEASES, "Worker-1", due=True, read=lease("NodeHealthCheck", 4000))),
         shows(claim=(False, remediation.HOLDER_IDENTITY), holds=True, holder="nm", claimed_before_take=True)),
        # Once it is ours the node is taken, and labelled, and the status says the Lease is held.
        (again(lease=remediation.LeaseView(LEASES, "Worker-1", known=OURS)),
         shows(phase="Succeeded", labels={remediation.EXCLUDE_LABEL: "true"}, conditions={"Drained": ("True", "Drained"), remediation.CONDITION: ("True", "Held")})),
        # The Lease is read afresh before the node is taken: ours, just claimed, it still shows as held.
        (again(lease=remediation.LeaseView(LEASES, "Worker-1", known=OURS, due=True, read=lease(remediation.HOLDER_IDENTITY, 3600))),
         shows(conditions={"Drained": ("True", "Drained"), remediation.CONDITION: ("True", "Held")}))),
    row("the quorum guard is asked again when a control-plane node is about to be taken, and every 10 s while it refuses",
        # Admitted an hour ago, m2 is in maintenance by then: taking m1 now would leave one Ready member of three.
        (scene(Maintenance(name="nm", node_name="m1"), node=M1, members=M2_TAKEN),
         shows(phase="Pending", patch=None, holds=False, removals=(), recheck=QUORUM_RECHECK_SECONDS, said_by=["Drained", quorum.CONDITION],
               conditions={"Drained": ("False", "WouldBreakEtcdQuorum"), quorum.CONDITION: ("False", "WouldBreakEtcdQuorum")},
               error=Text("taking it would leave 1, fewer than the majority of 2"), events=[(False, WARNING, "WouldBreakEtcdQuorum")])),
        (again(), shows(events=[])),  # said once
        # Once m2 is given back, the same maintenance takes its node.
        (again(members=quorum.Members((M1, control_plane_node("m2"), control_plane_node("m3")))), shows(holds=True, holder="nm"))),
    row("a maintenance that gave its slot back rejoins the queue once the checks pass, and takes nothing",
        # docs/policy.md, a slot given back: once the check passes it rejoins the queue (the gate's waiting plan).
        (scene(maintenance(terms=policy_terms(rejoin=Plan(phase="Pending", status={"phase": "Pending"}, recheck_in=1.0))), node=scene_node()),
         shows(plan=Plan(phase="Pending", status={"phase": "Pending"}, recheck_in=1.0)))),
]

# ------------------------------------------------------------------ under a policy: holds, drain rules, waitForHealthy
PRE_DRAIN = Condition(type="PreDrain", status="False", reason="JobRunning", message="preDrain Job nm-pre-drain-n1 of NodeMaintenancePolicy p is running")
PRE_DRAIN_JOB = {"metadata": {"name": "nm-pre-drain-n1"}}
PAUSED = "paused until the next maintenance window of NodeMaintenancePolicy p (windowEnd: Pause): ..."
POLICY = [
    row("preDrain: the Job is asked for and nothing is evicted until it has succeeded",
        (scene(maintenance(RUNNING, terms=policy_terms(hold=PRE_DRAIN.message, hold_recheck_in=2.0, conditions=(PRE_DRAIN,), jobs=(PRE_DRAIN_JOB,))),
               pods=WEB[:1]),
         shows(phase="Running", removals=(), holds=True, jobs=(PRE_DRAIN_JOB,), error=PRE_DRAIN.message, recheck=2.0,
               conditions={"Drained": ("False", "Draining"), "PreDrain": ("False", "JobRunning")}))),
    row("the timeout counts from when the node was taken, so it includes the preDrain Job",
        (scene(maintenance(TIMED_OUT, timeout=60, terms=policy_terms(hold=PRE_DRAIN.message, conditions=(PRE_DRAIN,))), pods=WEB[:1]),
         shows(phase="Failed", removals=(), holds=True, error=Text("stays cordoned", start="drain timed out after 60s")))),
    row("windowEnd Pause: evicts nothing new until the next window opens, stays Running with the node cordoned",
        (scene(maintenance(RUNNING, terms=policy_terms(hold=PAUSED, hold_recheck_in=3600.0)), pods=WEB[:1]),
         shows(phase="Running", removals=(), holds=True, patch=None, error=PAUSED, recheck=3600.0))),
    row("windowEnd Pause: the timeout keeps counting while paused",
        (scene(maintenance(TIMED_OUT, timeout=60, terms=policy_terms(hold=PAUSED, hold_recheck_in=3600.0)), pods=WEB[:1]),
         shows(phase="Failed", removals=(), holds=True, error=Text(start="drain timed out after 60s")))),
    row("windowEnd Pause: a drain under way looks again when the open window closes",
        (scene(maintenance(RUNNING, terms=policy_terms(hold_recheck_in=300.0)), pods=WEB[:1], budgets=[a_budget("web", allowed=0)]),
         shows(phase="Running", recheck=300.0))),
    row("the policies cannot be read: a held node is kept and nothing is evicted",
        (scene(maintenance(RUNNING, terms=policy_terms(rules=None, hold="the policies cannot be read", hold_recheck_in=5.0)), pods=WEB[:1]),
         shows(phase="Running", removals=(), holds=True, error="the policies cannot be read", recheck=5.0))),
    row("a misspelt drain annotation protects the pod, and lastError names it",
        (scene(maintenance(RUNNING, terms=policy_terms()), pods=[scene_pod("x", annotations={ANNOTATION: "sikp"})]),
         shows(phase="Running", removals=(), error=Text("app/x", "'sikp'", "neither skip nor wait-completed")))),
    row("waitForHealthy: a pod without a budget is judged by its ReplicaSet, a bare pod by nothing",
        (scene(maintenance(RUNNING, terms=policy_terms()), pods=[scene_pod("web-0"), scene_pod("bare", owner=None)]),
         shows(evicted_workloads=[{"kind": "ReplicaSet", "namespace": "app", "name": "x"}]))),
]


@pytest.mark.parametrize("steps", [*TAKING, *PODS, *BUDGETS, *RETRIES, *COORDINATION, *POLICY])
def test_a_drain_step(steps: list[tuple[Scene | Again, dict[str, Any]]]) -> None:
    for shown, expected in outcomes(steps):
        assert shown == expected


@pytest.mark.parametrize("m", [maintenance(), maintenance(status=RUNNING)], ids=["taking the node", "draining it"])
def test_what_the_caches_keep_of_nodes_and_pods_decides_as_the_whole_objects_do(m: Maintenance) -> None:
    # The engine keeps slim nodes and pods (a thousand queued maintenances hold theirs): the plan must not change.
    whole_node = scene_node(conditions=[{"type": "Ready", "status": "True", "lastHeartbeatTime": STAMP},
                                        {"type": "MemoryPressure", "status": "False"}])
    whole_node["metadata"]["labels"] = {"pool": "a"}
    whole_node["status"].update({"images": [{"names": ["registry.invalid/big:1"], "sizeBytes": 1}], "nodeInfo": {"kubeletVersion": "v1"}})
    last_applied = {"kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 10_000 + "}"}
    whole_pods = [
        scene_pod("web", annotations=last_applied),
        scene_pod("cache", annotations={**last_applied, ANNOTATION: "skip"}),
        scene_pod("static", owner=None, annotations={"kubernetes.io/config.mirror": "x"}),
    ]
    slim_pods = [pods.slim(p) for p in whole_pods]
    assert all("kubectl.kubernetes.io/last-applied-configuration" not in (p["metadata"].get("annotations") or {}) for p in slim_pods)
    assert "images" not in nodes.slim(whole_node)["status"]
    assert plan(m, nodes.slim(whole_node), slim_pods, [], NOW) == plan(m, whole_node, whole_pods, [], NOW)

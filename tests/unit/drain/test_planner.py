"""The drain planner, situation by situation, without a cluster: what it patches, removes, reports and posts,
also when a remediation Lease on the node is held by another."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.coordination import quorum as qu
from node_maintenance.coordination import remediation as rem
from node_maintenance.drain import node as nodes
from node_maintenance.drain import pods
from node_maintenance.drain.budgets import InFlight
from node_maintenance.drain.planner import NODE_HELD_RECHECK_SECONDS, Attempt, Maintenance, Plan, plan
from tests.unit.builders import (
    CLOCK,
    HELD,
    NOW,
    RUNNING,
    STAMP,
    ago,
    budget,
    control_plane_node,
    held_node,
    lease,
    maintenance,
    scene_node,
    scene_pod,
    worker_1,
)

a_budget = partial(budget, namespace="app", generation=2, resource_version="1", labels={"app": "web"}, observed=2,
                   healthy=3, desired=3, expected=3)


def evicted(result: Plan) -> list[str]:
    return [r.name for r in result.removals if not r.delete]


def deleted(result: Plan) -> list[str]:
    return [r.name for r in result.removals if r.delete]


def reasons(result: Plan) -> list[tuple[bool, str]]:
    return [(e.on_node, e.reason) for e in result.events]


# ------------------------------------------------------------------ taking the node


def test_missing_node_fails_and_waits_for_the_node_watch() -> None:
    result = plan(maintenance(), None, [], [], NOW)
    assert result.phase == "Failed" and not result.holds_node and result.node_patch is None
    assert result.status["lastError"] == "node 'n1' not found; the maintenance starts when a node of that name exists"
    assert result.status["drainProgress"] == 0 and "drainStartTime" not in result.status
    assert reasons(result) == [(False, "FailedMaintenance")]
    assert result.recheck_in is None  # the node watch reports the node when it appears


def test_node_held_by_another_maintenance_fails_without_touching_it() -> None:
    result = plan(maintenance(), held_node("other", cordoned=True), [scene_pod("p")], [], NOW, holder_exists=True)
    assert result.phase == "Failed" and result.node_patch is None and result.removals == ()
    assert "already in maintenance by NodeMaintenance other" in result.status["lastError"]
    assert result.recheck_in == NODE_HELD_RECHECK_SECONDS and not result.holds_node


def test_the_same_failure_is_announced_once() -> None:
    first = plan(maintenance(), None, [], [], NOW)
    again = plan(maintenance(first.status), None, [], [], NOW)
    assert reasons(first) == [(False, "FailedMaintenance")] and again.events == ()


def test_node_held_by_a_deleted_maintenance_is_taken_over() -> None:
    result = plan(maintenance(), held_node("gone", cordoned=True), [], [], NOW, holder_exists=False)
    assert result.node_patch is not None and result.node_patch["metadata"]["annotations"][nodes.HOLDER] == "nm"
    assert result.phase == "Succeeded"


def test_fresh_node_is_cordoned_tainted_and_announced_on_both_objects() -> None:
    result = plan(maintenance(), scene_node(), [], [], NOW)
    patch = result.node_patch
    assert patch is not None and patch["spec"]["unschedulable"] is True and nodes.TAINT in patch["spec"]["taints"]
    assert patch["metadata"]["resourceVersion"] == "7"  # refused if the node changed meanwhile
    assert reasons(result) == [(False, "BeginMaintenance"), (True, "BeginMaintenance"), (False, "SucceedMaintenance")]
    assert result.status["drainStartTime"] == STAMP and result.drained_after == 0


def test_held_node_someone_uncordoned_is_cordoned_again_without_announcing() -> None:
    result = plan(maintenance(RUNNING), held_node("nm", cordoned=False), [], [], NOW)
    assert result.node_patch is not None and result.node_patch["spec"]["unschedulable"] is True
    assert "BeginMaintenance" not in [r for _, r in reasons(result)]


def test_held_node_is_not_patched_again() -> None:
    assert plan(maintenance(RUNNING), HELD, [], [], NOW).node_patch is None


# ------------------------------------------------------------------ which pods go, and how


def test_mixed_node_evicts_deletes_finished_and_keeps_daemonset_and_mirror_pods() -> None:
    node_pods = [
        scene_pod("web"),
        scene_pod("bare", owner=None),
        scene_pod("job", owner="Job", phase="Succeeded"),
        scene_pod("agent", owner="DaemonSet"),
        scene_pod("static", owner=None, annotations={"kubernetes.io/config.mirror": "x"}),
    ]
    result = plan(maintenance(), scene_node(), node_pods, [], NOW)
    assert evicted(result) == ["bare", "web"] and deleted(result) == ["job"]
    assert result.phase == "Running"
    assert result.status["totalpods"] == 5 and result.status["evictionPods"] == 3
    assert result.status["pendingPods"] == ["bare", "job", "web"] and result.status["drainProgress"] == 0


def test_daemonset_pods_go_as_kubectl_drain_force_removes_them() -> None:
    """A finished DaemonSet pod is deleted and one whose DaemonSet is gone evicted; one whose DaemonSet exists stays."""
    node_pods = [
        scene_pod("agent", owner="DaemonSet", owner_name="agent"),
        scene_pod("spent", owner="DaemonSet", owner_name="agent", phase="Succeeded"),
        scene_pod("crashed", owner="DaemonSet", owner_name="agent", phase="Failed"),
        scene_pod("orphan", owner="DaemonSet", owner_name="gone"),
    ]
    result = plan(maintenance(), scene_node(), node_pods, [], NOW, daemonsets={"app/agent": True, "app/gone": False})
    assert evicted(result) == ["orphan"] and deleted(result) == ["crashed", "spent"]
    assert result.status["evictionPods"] == 3 and result.status["pendingPods"] == ["crashed", "orphan", "spent"]


def test_a_daemonset_pod_whose_daemonset_is_unknown_stays_and_is_not_reported_as_evicted() -> None:
    """When in doubt, hold: the DaemonSet's read failed, or it was not read yet."""
    node_pods = [scene_pod("agent", owner="DaemonSet", owner_name="agent"), scene_pod("web")]
    result = plan(maintenance(), scene_node(), node_pods, [], NOW, daemonsets={})
    assert evicted(result) == ["web"] and deleted(result) == []
    assert result.status["evictionPods"] == 1 and result.status["pendingPods"] == ["web"]
    drained = plan(maintenance(result.status), HELD, node_pods[:1], [], NOW)
    assert drained.phase == "Succeeded" and drained.removals == () and drained.status["pendingPods"] == []


def test_a_daemonset_pod_found_orphaned_later_is_evicted_then() -> None:
    drained = plan(maintenance({**RUNNING, "phase": "Succeeded"}), HELD, [scene_pod("agent", owner="DaemonSet")], [], NOW)
    assert drained.phase == "Succeeded" and drained.removals == ()
    known = plan(maintenance(drained.status), HELD, [scene_pod("agent", owner="DaemonSet")], [], NOW, daemonsets={"app/x": False})
    assert known.phase == "Running" and evicted(known) == ["agent"]


def test_pod_selector_and_grace_period_reach_the_removals() -> None:
    node_pods = [scene_pod("a", labels={"drain": "yes"}), scene_pod("b", labels={"drain": "no"})]
    result = plan(maintenance(selector={"matchLabels": {"drain": "yes"}}, grace=3), scene_node(), node_pods, [], NOW)
    assert evicted(result) == ["a"] and result.removals[0].grace == 3 and result.removals[0].uid == "uid-a"
    assert result.status["evictionPods"] == 1 and result.status["totalpods"] == 2


def test_terminating_pods_are_waited_for_not_evicted_again() -> None:
    result = plan(maintenance(RUNNING), HELD, [scene_pod("p", deleted_at=ago(1))], [], NOW)
    assert result.removals == () and result.phase == "Running" and result.status["pendingPods"] == ["p"]
    assert result.recheck_in is None  # the pod watch reports it gone


def test_accepted_eviction_is_not_sent_again_while_the_pod_watch_catches_up() -> None:
    attempts = {"uid-p": Attempt(CLOCK + 30, accepted=True)}
    result = plan(maintenance(RUNNING), HELD, [scene_pod("p")], [], NOW, attempts=attempts)
    assert result.removals == () and result.recheck_in == pytest.approx(30)


def test_totals_and_drain_start_survive_a_restart() -> None:
    result = plan(maintenance(RUNNING), HELD, [scene_pod("p")], [], NOW)
    assert result.status["totalpods"] == 3 and result.status["evictionPods"] == 3
    assert result.status["drainStartTime"] == ago(10) and result.status["drainProgress"] == 67


def test_all_gone_succeeds_once() -> None:
    first = plan(maintenance(RUNNING), HELD, [scene_pod("agent", owner="DaemonSet")], [], NOW)
    assert first.phase == "Succeeded" and first.status["lastError"] == "" and first.status["drainProgress"] == 100
    assert reasons(first) == [(False, "SucceedMaintenance")] and first.drained_after == 10
    assert {c["type"]: c["status"] for c in first.status["conditions"]} == {"Drained": "True"}
    again = plan(maintenance(first.status), HELD, [], [], NOW)
    assert again.events == () and again.drained_after is None and again.recheck_in is None


def test_late_pod_on_a_drained_node_is_evicted() -> None:
    drained = {**RUNNING, "phase": "Succeeded"}
    result = plan(maintenance(drained), HELD, [scene_pod("late")], [], NOW)
    assert result.phase == "Running" and evicted(result) == ["late"]


def test_replaced_pod_is_a_new_pod() -> None:
    """A replacement that reuses the name has a new uid: the old pod's attempt does not hold it back."""
    attempts = {"uid-old": Attempt(CLOCK + 30, accepted=True)}
    result = plan(maintenance(RUNNING), HELD, [scene_pod("db-0")], [], NOW, attempts=attempts)
    assert evicted(result) == ["db-0"] and result.removals[0].uid == "uid-db-0"


# ------------------------------------------------------------------ budgets pace the evictions


WEB = [scene_pod(f"web-{i}", labels={"app": "web"}) for i in range(5)]


@pytest.mark.parametrize(
    ("allowed", "in_flight", "sent"),
    [(0, 0, 0), (1, 0, 1), (2, 0, 2), (5, 0, 5), (9, 0, 5), (2, 1, 1), (2, 2, 0), (1, 3, 0)],
)
def test_no_more_evictions_than_the_budget_allows_now(allowed: int, in_flight: int, sent: int) -> None:
    flights = {"app/web": InFlight(in_flight, 7.5)} if in_flight else {}
    result = plan(maintenance(RUNNING), HELD, WEB, [a_budget("web", allowed=allowed)], NOW, in_flight=flights)
    assert len(result.removals) == sent
    assert all(r.budget == "app/web" and r.budget_version == "1" for r in result.removals)
    blocked = 5 - sent
    assert result.status["lastError"].count("waits on PodDisruptionBudget app/web") == blocked
    # The budget watch says when it allows more; evictions in flight stop counting at a known time.
    assert result.recheck_in == (7.5 if in_flight and blocked else None)


def test_an_eviction_whose_answer_was_lost_holds_the_budget_only_until_it_expires() -> None:
    """The budget allows one, and one eviction was sent whose acceptance no event has shown (its answer
    lost to a broken connection): the drain waits, and looks again when that eviction stops counting."""
    result = plan(maintenance(RUNNING), HELD, WEB, [a_budget("web", allowed=1)], NOW, in_flight={"app/web": InFlight(1, 3.0)})
    assert result.removals == () and result.recheck_in == 3.0
    later = plan(maintenance(RUNNING), HELD, WEB, [a_budget("web", allowed=1)], NOW, in_flight={})
    assert len(later.removals) == 1


def test_pods_without_a_budget_go_at_once_beside_paced_ones() -> None:
    node_pods = [*WEB, scene_pod("bare", owner=None), scene_pod("other", labels={"app": "other"})]
    result = plan(maintenance(RUNNING), HELD, node_pods, [a_budget("web", allowed=1)], NOW)
    assert sorted(evicted(result)) == ["bare", "other", "web-0"]


def test_budget_in_another_namespace_does_not_pace() -> None:
    result = plan(maintenance(RUNNING), HELD, WEB, [a_budget("web", allowed=0, namespace="elsewhere")], NOW)
    assert len(result.removals) == 5


def test_refused_pod_waits_for_the_budget_to_change_not_for_a_timer() -> None:
    attempts = {"uid-web-0": Attempt(CLOCK, refused_by=(("app/web", "1"),), failures=1)}
    same = plan(maintenance(RUNNING), HELD, WEB[:1], [a_budget("web", allowed=1, resource_version="1")], NOW, attempts=attempts)
    assert same.removals == () and "web-0 waits on PodDisruptionBudget app/web" in same.status["lastError"]
    assert same.recheck_in is None
    changed = plan(maintenance(RUNNING), HELD, WEB[:1], [a_budget("web", allowed=1, resource_version="2")], NOW, attempts=attempts)
    assert evicted(changed) == ["web-0"]


def test_budget_not_yet_processed_allows_nothing() -> None:
    result = plan(maintenance(RUNNING), HELD, WEB, [a_budget("web", allowed=3, observed=1)], NOW)
    assert result.removals == ()


@pytest.mark.parametrize(
    ("pod", "budget", "goes"),
    [
        (scene_pod("p", labels={"app": "web"}, phase="Pending"), a_budget("web", allowed=0), True),  # not running yet
        (scene_pod("p", labels={"app": "web"}, ready=False), a_budget("web", allowed=0, unhealthyPodEvictionPolicy="AlwaysAllow"), True),
        (scene_pod("p", labels={"app": "web"}, ready=False), a_budget("web", allowed=0), True),  # healthy enough without it
        (scene_pod("p", labels={"app": "web"}, ready=True), a_budget("web", allowed=0), False),
    ],
)
def test_pods_the_eviction_api_lets_past_a_budget_are_not_held(pod: dict[str, Any], budget: dict[str, Any], goes: bool) -> None:
    result = plan(maintenance(RUNNING), HELD, [pod], [budget], NOW)
    assert bool(result.removals) is goes


# ------------------------------------------------------------------ retries, failures, timeout


def test_pod_waiting_on_a_retry_time_is_tried_then_and_its_error_shown() -> None:
    attempts = {"uid-bare": Attempt(CLOCK + 4, error="removal failed: Forbidden (403)", failures=2)}
    waiting = plan(maintenance(RUNNING), HELD, [scene_pod("bare", owner=None)], [], NOW, attempts=attempts)
    assert waiting.removals == () and waiting.recheck_in == pytest.approx(4)
    assert waiting.status["lastError"] == "app/bare: removal failed: Forbidden (403)"
    later = NOW + datetime.timedelta(seconds=5)
    assert evicted(plan(maintenance(RUNNING), HELD, [scene_pod("bare", owner=None)], [], later, attempts=attempts)) == ["bare"]


def test_timeout_fails_stops_evicting_and_keeps_the_node() -> None:
    status = {**RUNNING, "drainStartTime": ago(61)}
    result = plan(maintenance(status, timeout=60), HELD, WEB[:1], [a_budget("web", allowed=0)], NOW)
    assert result.phase == "Failed" and result.removals == () and result.holds_node and result.node_patch is None
    error = result.status["lastError"]
    assert error.startswith("drain timed out after 60s with pods left: app/web-0")
    assert "waits on PodDisruptionBudget app/web" in error and "stays cordoned" in error
    assert reasons(result) == [(False, "FailedMaintenance")]
    assert plan(maintenance(result.status, timeout=60), HELD, WEB[:1], [a_budget("web", allowed=0)], NOW).events == ()


def test_timed_out_drain_succeeds_if_the_pods_leave_after_all() -> None:
    status = {**RUNNING, "phase": "Failed", "drainStartTime": ago(600)}
    assert plan(maintenance(status, timeout=60), HELD, [], [], NOW).phase == "Succeeded"


def test_timeout_counts_from_the_drain_start_not_from_creation() -> None:
    """A maintenance that waited (its node missing) gets its whole timeout once it takes the node."""
    waited = {"phase": "Failed", "lastError": "node 'n1' not found; ...", "totalpods": 0, "evictionPods": 0}
    result = plan(maintenance(waited, timeout=60), scene_node(), WEB[:1], [a_budget("web", allowed=0)], NOW)
    assert result.phase == "Running" and result.status["drainStartTime"] == STAMP
    assert result.recheck_in == pytest.approx(61)  # looks again when the timeout is due
    still = plan(maintenance(result.status, timeout=60), HELD, WEB[:1], [a_budget("web", allowed=0)], NOW + datetime.timedelta(seconds=59))
    assert still.phase == "Running"


def test_status_carries_what_a_user_reads() -> None:
    result = plan(maintenance(RUNNING, timeout=0), HELD, WEB[:2], [a_budget("web", allowed=1)], NOW)
    status = result.status
    assert status["phase"] == "Running" and status["pendingPods"] == ["web-0", "web-1"]
    assert status["pendingPodsRefs"] == [{"namespace": "app", "name": "web-0"}, {"namespace": "app", "name": "web-1"}]
    assert status["lastError"] == "app/web-1 waits on PodDisruptionBudget app/web"
    assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]} == {"Drained": ("False", "Draining")}
    assert status["lastUpdate"] == STAMP


# ------------------------------------------------------------------ a remediation Lease on the node


def test_another_holder_keeps_the_node_untouched_and_says_who() -> None:
    node = worker_1(unschedulable=False)
    read = rem.LeaseView("medik8s-leases", "Worker-1", due=True, read=lease("NodeHealthCheck", 10))
    result = plan(Maintenance("nm", "Worker-1"), node, [], [], NOW, lease=read)
    assert result.phase == "Failed" and result.node_patch is None and not result.holds_node and result.recheck_in == 5
    assert result.lease_claim is None and result.lease_seen is not None and result.lease_seen.other == "NodeHealthCheck"
    assert "Lease medik8s-leases/node-worker-1 belongs to NodeHealthCheck" in result.status["lastError"]
    assert [(e.type, e.reason) for e in result.events] == [("Warning", "FailedMaintenance")]
    assert (rem.condition(result.lease_seen).status, rem.condition(result.lease_seen).reason) == ("False", "HeldByAnother")
    # Between reads, what the last one found still holds the node back.
    known = rem.LeaseView("medik8s-leases", "Worker-1", known=result.lease_seen)
    again = plan(Maintenance("nm", "Worker-1", status=result.status), node, [], [], NOW, lease=known)
    assert again.phase == "Failed" and again.node_patch is None and again.lease_claim is None and not again.holds_node
    # Once the holder lets it expire, the plan claims it first, and takes nothing yet.
    freed = rem.LeaseView("medik8s-leases", "Worker-1", due=True, read=lease("NodeHealthCheck", 4000))
    claiming = plan(Maintenance("nm", "Worker-1", status=result.status), node, [], [], NOW, lease=freed)
    assert claiming.lease_claim is not None and not claiming.lease_claim.create and claiming.node_patch is None
    assert claiming.lease_claim.body["spec"]["holderIdentity"] == rem.HOLDER_IDENTITY
    # Once it is ours the node is taken, and labelled, and the status says the Lease is held.
    ours = rem.LeaseView("medik8s-leases", "Worker-1", known=rem.LeaseState("medik8s-leases", "Worker-1"))
    taken = plan(Maintenance("nm", "Worker-1", status=result.status), node, [], [], NOW, lease=ours)
    assert taken.phase == "Succeeded" and taken.node_patch is not None and taken.node_patch["metadata"]["labels"] == {rem.EXCLUDE_LABEL: "true"}
    held = next(c for c in taken.status["conditions"] if c["type"] == rem.CONDITION)
    assert (held["status"], held["reason"]) == ("True", "Held")
    # The Lease is read afresh before the node is taken: ours, just claimed, it still shows as held.
    fresh = rem.LeaseView("medik8s-leases", "Worker-1", known=rem.LeaseState("medik8s-leases", "Worker-1"), due=True,
                          read=lease(rem.HOLDER_IDENTITY, 3600))
    again = plan(Maintenance("nm", "Worker-1", status=result.status), node, [], [], NOW, lease=fresh)
    assert next(c for c in again.status["conditions"] if c["type"] == rem.CONDITION)["status"] == "True"


# ------------------------------------------------------------------ checked again at takeover


def test_the_quorum_guard_is_asked_again_when_a_control_plane_node_is_about_to_be_taken() -> None:
    # Admitted an hour ago, m2 is in maintenance by then: taking m1 now would leave one Ready member of three.
    m1 = control_plane_node("m1", uid="u1", resource_version="1", annotations={})
    members = qu.Members((m1, control_plane_node("m2", annotations={nodes.HOLDER: "other"}), control_plane_node("m3")))
    held = plan(Maintenance("nm", "m1"), m1, [], [], NOW, members=members)
    assert held.phase == "Pending" and held.node_patch is None and not held.holds_node and not held.removals
    condition = next(c for c in held.status["conditions"] if c["type"] == qu.CONDITION)
    assert (condition["status"], condition["reason"]) == ("False", "WouldBreakEtcdQuorum")
    assert "taking it would leave 1, fewer than the majority of 2" in condition["message"] == held.status["lastError"]
    assert reasons(held) == [(False, "WouldBreakEtcdQuorum")]
    again = plan(Maintenance("nm", "m1", status=held.status), m1, [], [], NOW, members=members)
    assert again.events == ()  # said once
    # Once m2 is given back, the same maintenance takes its node.
    members = qu.Members((m1, control_plane_node("m2"), control_plane_node("m3")))
    taken = plan(Maintenance("nm", "m1", status=held.status), m1, [], [], NOW, members=members)
    assert taken.holds_node and taken.node_patch is not None


def test_what_the_caches_keep_of_nodes_and_pods_decides_as_the_whole_objects_do() -> None:
    # The engine keeps slim nodes and pods (a thousand queued maintenances hold theirs): the plan must not change.
    whole_node = scene_node(conditions=[{"type": "Ready", "status": "True", "lastHeartbeatTime": STAMP},
                                        {"type": "MemoryPressure", "status": "False"}])
    whole_node["metadata"]["labels"] = {"pool": "a"}
    whole_node["status"].update({"images": [{"names": ["registry.invalid/big:1"], "sizeBytes": 1}], "nodeInfo": {"kubeletVersion": "v1"}})
    last_applied = {"kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 10_000 + "}"}
    whole_pods = [
        scene_pod("web", annotations=last_applied),
        scene_pod("cache", annotations={**last_applied, "nodemaintenance.kubevirt.io/drain": "skip"}),
        scene_pod("static", owner=None, annotations={"kubernetes.io/config.mirror": "x"}),
    ]
    slim_pods = [pods.slim(p) for p in whole_pods]
    assert all("kubectl.kubernetes.io/last-applied-configuration" not in (p["metadata"].get("annotations") or {}) for p in slim_pods)
    assert "images" not in nodes.slim(whole_node)["status"]
    for m in (maintenance(), maintenance(status=RUNNING)):
        assert plan(m, nodes.slim(whole_node), slim_pods, [], NOW) == plan(m, whole_node, whole_pods, [], NOW)

"""NodeMaintenancePolicy decisions without a cluster: limits, slots, queue order, conflicts, statuses."""

from __future__ import annotations

import datetime
from functools import partial
from typing import Any

import pytest

from node_maintenance.api import SERVICE_ACCOUNT
from node_maintenance.api.conditions import Condition
from node_maintenance.drain import bookkeeping, status
from node_maintenance.drain.nodes import HOLDER
from node_maintenance.drain.planner import plan
from node_maintenance.drain.plans import Plan
from node_maintenance.policy import line, model, policy_status, terms, wording
from node_maintenance.policy.verdicts import Decision, Verdict, VerdictKind
from tests.unit.builders import nm, nm_policy, node, policy_hook, scene_pod, seen_by_policies

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
POOL_A = {"matchLabels": {"pool": "a"}}
DELETED = "2026-01-01T11:00:00Z"

# Nodes of pool a, Ready and schedulable unless said otherwise; a node a NodeMaintenance holds is cordoned.
a_node = partial(node, labels={"pool": "a"}, annotations={}, unschedulable=False, ready=True)
an_nm = partial(nm, uid="uid-{name}")


def _waiting(body: dict[str, Any], verdict: Verdict, now: datetime.datetime = NOW) -> Plan:
    """The waiting plan of ``body`` under ``verdict``, its status written out as the planner writes it."""
    decided = wording.waiting_plan(body, verdict, now)
    assert decided.report is not None
    return decided.written(status.render(body.get("status") or {}, decided.report, generation=body["metadata"].get("generation", 1), now=now))


def at(second: int) -> str:
    """A creation time: the NodeMaintenances of a test are created ``second`` seconds apart, in that order."""
    return f"2026-01-01T10:00:{second:02d}Z"


def a_policy(name: str = "p", selector: dict[str, Any] | None = None, **spec: Any) -> model.Policy:
    """The decisions' view of a NodeMaintenancePolicy, of pool a unless it selects otherwise."""
    return model.Policy.of(nm_policy(name, node_selector=selector or POOL_A, **spec))


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        (None, 10, None),
        (0, 10, 0),
        (3, 10, 3),
        ("0%", 10, 0),
        ("20%", 10, 2),
        ("25%", 10, 2),  # rounded down
        ("10%", 5, 1),  # never below 1 while non-zero, or a small pool would never move
        ("1%", 0, 1),
        ("100%", 7, 7),
        ("150%", 4, 6),
    ],
)
def test_counts_and_percentages_resolve_to_node_counts(value: int | str | None, total: int, expected: int | None) -> None:
    assert model.resolve(value, total) == expected


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (a_node("n"), False),
        (a_node("n", unschedulable=True), True),
        (a_node("n", ready=False), True),
        (node("n", spec={}, status={}), True),  # no Ready condition yet
    ],
)
def test_unavailable_means_unschedulable_or_not_ready(node: dict[str, Any], expected: bool) -> None:
    assert model.unavailable(node) is expected


def _kinds(decision: Decision) -> dict[str, tuple[str, int]]:
    return {name: (v.kind, v.position) for name, v in decision.verdicts.items()}


def test_slots_go_in_creation_order_and_the_rest_wait_in_line() -> None:
    node_list = [a_node(f"n{i}") for i in range(5)]
    # Created out of name order: creation time decides.
    nms = [an_nm("e", "n4", created=at(1)), an_nm("a", "n0", created=at(5)), an_nm("c", "n2", created=at(2)),
           an_nm("b", "n1", created=at(4)), an_nm("d", "n3", created=at(3))]
    decision = line.decide([a_policy(maxParallel=2)], node_list, nms, now=NOW)
    assert _kinds(decision) == {"e": ("Admitted", 0), "c": ("Admitted", 0), "d": ("Waiting", 1), "b": ("Waiting", 2), "a": ("Waiting", 3)}
    assert decision.summaries["p"].queue == ("d", "b", "a")


def test_creation_time_ties_go_by_the_name_s_numbers_then_by_name() -> None:
    # Created within the same second: w-2b and w-9 were meant before w-10; w-09 and w-9, of the same number, go by name.
    node_list = [a_node(f"n{i}") for i in range(5)]
    nms = [an_nm("w-10", "n0", created=at(1)), an_nm("w-9", "n1", created=at(1)), an_nm("w-09", "n2", created=at(1)),
           an_nm("w-2b", "n3", created=at(1)), an_nm("a", "n4", created=at(2))]
    decision = line.decide([a_policy(maxParallel=1)], node_list, nms, now=NOW)
    assert decision.summaries["p"].queue == ("w-09", "w-9", "w-10", "a")
    assert decision.verdicts["w-2b"].kind == VerdictKind.ADMITTED


def test_maintenances_holding_their_node_keep_their_slot_and_count() -> None:
    node_list = [a_node("n0", holder="late", unschedulable=True), a_node("n1"), a_node("n2")]
    nms = [an_nm("early", "n1", created=at(1)), an_nm("late", "n0", created=at(9)), an_nm("middle", "n2", created=at(5))]
    decision = line.decide([a_policy(maxParallel=2)], node_list, nms, now=NOW)
    assert _kinds(decision) == {"late": ("Admitted", 0), "early": ("Admitted", 0), "middle": ("Waiting", 1)}
    assert decision.summaries["p"].in_maintenance == 1


@pytest.mark.parametrize(
    ("spec", "node_list", "expected"),
    [
        # Unavailable counts nodes already unschedulable or NotReady, not only ours.
        ({"maxUnavailable": 1}, [a_node("n0", ready=False), a_node("n1"), a_node("n2")], {"m1": ("Waiting", 1), "m2": ("Waiting", 2)}),
        ({"maxUnavailable": 2}, [a_node("n0", ready=False), a_node("n1"), a_node("n2")], {"m1": ("Admitted", 0), "m2": ("Waiting", 1)}),
        # Taking a node that is already out of service adds nothing to the unavailable count.
        ({"maxUnavailable": 1}, [a_node("n0"), a_node("n1", unschedulable=True), a_node("n2")], {"m1": ("Admitted", 0), "m2": ("Waiting", 1)}),
        # ... so it is admitted even while other nodes already exceed the limit, and the line moves on behind it.
        ({"maxUnavailable": 1}, [a_node("n0", ready=False), a_node("n1", ready=False), a_node("n2")], {"m1": ("Admitted", 0), "m2": ("Waiting", 1)}),
        # Both limits hold: the tighter one decides.
        ({"maxParallel": 3, "maxUnavailable": "50%"}, [a_node(f"n{i}") for i in range(4)], {"m1": ("Admitted", 0), "m2": ("Admitted", 0)}),
        ({"maxParallel": 1, "maxUnavailable": "50%"}, [a_node(f"n{i}") for i in range(4)], {"m1": ("Admitted", 0), "m2": ("Waiting", 1)}),
        ({"maxParallel": 0}, [a_node(f"n{i}") for i in range(3)], {"m1": ("Waiting", 1), "m2": ("Waiting", 2)}),
        ({}, [a_node(f"n{i}") for i in range(3)], {"m1": ("Admitted", 0), "m2": ("Admitted", 0)}),
    ],
)
def test_limits(spec: dict[str, Any], node_list: list[dict[str, Any]], expected: dict[str, tuple[str, int]]) -> None:
    decision = line.decide([a_policy(**spec)], node_list, [an_nm("m1", "n1", created=at(1)), an_nm("m2", "n2", created=at(2))], now=NOW)
    assert _kinds(decision) == expected


def test_no_maintenance_overtakes_the_first_in_line() -> None:
    # m1's node would raise the unavailable count past the limit; m2's node is already down and would fit,
    # but slots go strictly in creation order.
    node_list = [a_node("n0", holder="m0", unschedulable=True), a_node("n1"), a_node("n2", ready=False)]
    nms = [an_nm("m0", "n0", created=at(0)), an_nm("m1", "n1", created=at(1)), an_nm("m2", "n2", created=at(2))]
    decision = line.decide([a_policy(maxUnavailable=2)], node_list, nms, now=NOW)
    assert _kinds(decision) == {"m0": ("Admitted", 0), "m1": ("Waiting", 1), "m2": ("Waiting", 2)}


def test_a_waiting_maintenance_being_deleted_frees_nothing_and_leaves_the_line() -> None:
    node_list = [a_node("n0", holder="m0", unschedulable=True), a_node("n1"), a_node("n2")]
    nms = [an_nm("m0", "n0", created=at(0)), an_nm("m1", "n1", created=at(1), deleted_at=DELETED), an_nm("m2", "n2", created=at(2))]
    decision = line.decide([a_policy(maxParallel=1)], node_list, nms, now=NOW)
    assert _kinds(decision) == {"m0": ("Admitted", 0), "m2": ("Waiting", 1)}


def test_a_holder_that_no_longer_exists_holds_nothing_and_its_node_is_governed() -> None:
    # "gone" held n0 and its finalizer was removed by hand: its record stays on the node, which stays cordoned.
    node_list = [a_node("n0", holder="gone", unschedulable=True), a_node("n1", holder="m1", unschedulable=True), a_node("n2")]
    nms = [an_nm("m1", "n1", created=at(1)), an_nm("next", "n0", created=at(2)), an_nm("last", "n2", created=at(3))]
    decision = line.decide([a_policy(maxParallel=1)], node_list, nms, now=NOW)
    assert _kinds(decision) == {"m1": ("Admitted", 0), "next": ("Waiting", 1), "last": ("Waiting", 2)}  # governed, in line
    assert decision.summaries["p"].in_maintenance == 1
    decision = line.decide([a_policy(maxParallel=2)], node_list, nms, now=NOW)
    assert _kinds(decision) == {"m1": ("Admitted", 0), "next": ("Admitted", 0), "last": ("Waiting", 1)}


def test_nodes_outside_every_policy_are_not_governed() -> None:
    node_list = [a_node("n0"), a_node("other", labels={"pool": "b"})]
    decision = line.decide([a_policy(maxParallel=0)], node_list, [an_nm("m", "other", created=at(1)), an_nm("w", "n0", created=at(2))], now=NOW)
    assert "m" not in decision.verdicts and decision.verdicts["w"].kind == VerdictKind.WAITING
    assert decision.summaries["p"].selected == 1


def test_a_node_selected_by_two_policies_is_a_conflict_for_both_and_its_maintenance() -> None:
    node_list = [a_node("n0", labels={"pool": "a", "zone": "z1"}), a_node("n1")]
    policies = [a_policy("pool"), a_policy("zone", {"matchLabels": {"zone": "z1"}})]
    decision = line.decide(policies, node_list, [an_nm("m", "n0", created=at(1)), an_nm("ok", "n1", created=at(2))], now=NOW)
    assert decision.verdicts["m"].kind == VerdictKind.CONFLICT and decision.verdicts["m"].policies == ("pool", "zone")
    assert "pool, zone" in wording.message(decision.verdicts["m"], "n0") and "nodeSelectors" in wording.message(decision.verdicts["m"], "n0")
    assert decision.verdicts["ok"].kind == VerdictKind.ADMITTED
    assert decision.summaries["pool"].conflicts == decision.summaries["zone"].conflicts == (("n0", ("pool", "zone")),)
    status = policy_status.policy_status({}, decision.summaries["zone"], 1, "2026-01-01T12:00:00Z")
    assert status["conditions"][0]["type"] == "Conflict" and status["conditions"][0]["status"] == "True"
    assert "node n0 is selected by pool, zone" in status["conditions"][0]["message"]


def test_a_policy_whose_hook_would_run_as_the_operator_says_so_in_its_status() -> None:
    borrowing = a_policy("borrowing", preDrain=policy_hook(serviceAccountName="storage-admin"),
                         postMaintenance=policy_hook(serviceAccount=SERVICE_ACCOUNT))
    own = a_policy("own", {"matchLabels": {"pool": "b"}}, preDrain=policy_hook(serviceAccountName="storage-admin"))
    decision = line.decide([borrowing, own], [a_node("n0")], [], now=NOW)
    conditions = {c["type"]: c for c in policy_status.policy_status({}, decision.summaries["borrowing"], 1, "2026-01-01T12:00:00Z")["conditions"]}
    condition = conditions[policy_status.BORROWED_IDENTITY]
    assert (condition["status"], condition["reason"]) == ("True", "OperatorServiceAccount")
    assert condition["message"].startswith(f"spec.postMaintenance.jobTemplate.spec.template.spec.serviceAccount names the operator's "
                                           f"ServiceAccount {SERVICE_ACCOUNT}")
    assert "run the hook as a ServiceAccount of its own" in condition["message"] and "preDrain" not in condition["message"]
    assert conditions["Conflict"]["status"] == "False"
    fine = next(c for c in policy_status.policy_status({}, decision.summaries["own"], 1, "2026-01-01T12:00:00Z")["conditions"]
                if c["type"] == policy_status.BORROWED_IDENTITY)
    assert (fine["status"], fine["reason"]) == ("False", "OwnServiceAccounts")


def test_waiting_is_phase_pending_with_a_condition_naming_the_policy_and_where_its_place_is() -> None:
    nms = [an_nm("a", "n0", created=at(1)), an_nm("b", "n1", created=at(2))]
    decision = line.decide([a_policy("rolling", maxParallel=0)], [a_node("n0"), a_node("n1")], nms, now=NOW)
    body = an_nm("b", "n1", created=at(2), status={})
    plan = _waiting(body, decision.verdicts["b"], NOW)
    assert plan.phase == "Pending" and plan.node_patch is None and not plan.removals and not plan.holds_node
    queued = next(c for c in plan.status["conditions"] if c["type"] == "Queued")
    assert (queued["status"], queued["reason"]) == ("True", "WaitingForSlot")
    assert "NodeMaintenancePolicy rolling" in queued["message"] and "its place in line is in the policy's status.queue" in queued["message"]
    assert [e.reason for e in plan.events] == ["WaitingForSlot"]
    assert plan.recheck_in == bookkeeping.in_line_interval(2)  # it looks at its place again at the line's pace
    # Moving up the line changes nothing of its status (nothing to write) and posts no new event: a line of thousands
    # would otherwise rewrite every one of them at each admission.
    again = _waiting({**body, "status": plan.status}, Verdict(VerdictKind.WAITING, decision.verdicts["b"].policy, 1, 1), NOW)
    assert not again.events and again.status == plan.status


def test_drain_defaults_fill_only_what_the_maintenance_leaves_out() -> None:
    policy = a_policy(drain={"gracePeriodSeconds": 60, "timeoutSeconds": 600})
    body = nm("m", "n0", drain={"timeoutSeconds": 30})
    assert model.with_defaults(body, policy)["spec"]["drain"] == {"gracePeriodSeconds": 60, "timeoutSeconds": 30}
    assert body["spec"]["drain"] == {"timeoutSeconds": 30}


def test_a_maintenance_whose_policy_is_gone_stops_saying_it_waits() -> None:
    waiting = _waiting(an_nm("m", "n0", created=at(1), status={}), Verdict(VerdictKind.WAITING, a_policy(), 1, 1), NOW).status
    assert wording.left_line(waiting) == (Condition("Queued", "False", "NoPolicy", "no NodeMaintenancePolicy selects the node"),)
    assert wording.left_line({}) == ()


def test_a_heartbeat_leaves_what_the_policies_keep_of_a_node_unchanged() -> None:
    def a_node_at(heartbeat: str, unschedulable: bool = False) -> dict[str, Any]:
        return node("w1", labels={"pool": "a"}, resource_version=heartbeat, annotations={"kwok.x-k8s.io/node": "fake"},
                    unschedulable=unschedulable,
                    conditions=[{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat},
                                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat}])

    assert model.slim_node(a_node_at("1")) == model.slim_node(a_node_at("2"))
    assert model.slim_node(a_node_at("1")) != model.slim_node(a_node_at("2", unschedulable=True))
    held = a_node_at("3")
    held["metadata"]["annotations"]["nodemaintenance.kubevirt.io/holder"] = "nm-w1"
    assert model.slim_node(held)["metadata"]["annotations"] == {"nodemaintenance.kubevirt.io/holder": "nm-w1"}


@pytest.mark.parametrize("policies", [
    [a_policy("p", maxParallel=1)],  # its node's one policy admits it, whatever the line
    [a_policy("p", maxParallel=0), a_policy("q", maxParallel=5)],  # two select its node: a conflict naming both
    [a_policy("p", selector={"matchLabels": {"pool": "b"}})],  # none selects it: no verdict
])
def test_a_maintenance_holding_its_node_is_decided_alone_as_the_whole_decision_decides_it(policies: list[model.Policy]) -> None:
    node_list = [a_node("n0", holder="m0", unschedulable=True), a_node("n1", holder="m1", unschedulable=True), a_node("n2")]
    nms = [an_nm("m0", "n0", created=at(1)), an_nm("m1", "n1", created=at(2)), an_nm("m2", "n2", created=at(3))]
    decision = line.decide(policies, node_list, nms, now=NOW)
    for held in node_list[:2]:
        assert line.holding(policies, held, NOW) == decision.verdicts.get(held["metadata"]["annotations"][HOLDER])


# ----------------------------------------------------------------- maintenance windows
NIGHTLY = [{"schedule": "0 22 * * *", "duration": "4h"}]  # 22:00 to 02:00 UTC; NOW is 12:00
AT_NIGHT = datetime.datetime(2026, 1, 1, 23, 0, 0, tzinfo=datetime.UTC)


def test_in_line_while_no_window_is_open_and_admitted_once_one_opens() -> None:
    node_list = [a_node("n0"), a_node("n1"), a_node("n2")]
    nms = [an_nm("m0", "n0", created=at(0)), an_nm("m1", "n1", created=at(1)), an_nm("m2", "n2", created=at(2))]
    policy = a_policy(maxParallel=2, windows=NIGHTLY)
    day = line.decide([policy], node_list, nms, now=NOW)
    assert _kinds(day) == {"m0": (VerdictKind.CLOSED, 1), "m1": (VerdictKind.CLOSED, 2), "m2": (VerdictKind.CLOSED, 3)}
    queued = wording.queued_condition(day.verdicts["m1"], "n1")
    assert (queued.status, queued.reason) == ("True", "WaitingForWindow")
    assert queued.message.startswith(f"waiting for a maintenance window of NodeMaintenancePolicy {policy.name}: the next opens at "
                                     "2026-01-01T22:00:00Z; its place in line is in the policy's status.queue")
    assert day.summaries["p"].queue == ("m0", "m1", "m2")
    # Waiting, it looks again when the window opens, if that comes before its next look at the line.
    plan = _waiting(an_nm("m1", "n1", created=at(1), status={}), day.verdicts["m1"], NOW)
    assert plan.phase == "Pending" and plan.node_patch is None and [e.reason for e in plan.events] == ["WaitingForWindow"]
    assert plan.recheck_in == bookkeeping.in_line_interval(3)
    soon = _waiting(an_nm("m1", "n1", created=at(1), status={}), day.verdicts["m1"],
                                datetime.datetime(2026, 1, 1, 21, 59, 58, tzinfo=datetime.UTC))
    assert soon.recheck_in == pytest.approx(2 + wording.WINDOW_MARGIN_SECONDS)
    night = line.decide([policy], node_list, nms, now=AT_NIGHT)
    assert _kinds(night) == {"m0": (VerdictKind.ADMITTED, 0), "m1": (VerdictKind.ADMITTED, 0), "m2": (VerdictKind.WAITING, 1)}


def test_at_the_window_s_end_those_holding_their_node_go_on_and_a_slot_granted_stands() -> None:
    node_list = [a_node("n0", holder="m0", unschedulable=True), a_node("n1"), a_node("n2")]
    nms = [an_nm("m0", "n0", created=at(0)), an_nm("m1", "n1", created=at(1)), an_nm("m2", "n2", created=at(2))]
    decision = line.decide([a_policy(windows=NIGHTLY)], node_list, nms, admitted={"m1": "p"}, now=NOW)
    assert _kinds(decision) == {"m0": (VerdictKind.ADMITTED, 0), "m1": (VerdictKind.ADMITTED, 0), "m2": (VerdictKind.CLOSED, 1)}
    assert not decision.verdicts["m0"].paused  # windowEnd Continue


@pytest.mark.parametrize(("max_parallel", "kinds"), [
    (3, {"m0": (VerdictKind.ADMITTED, 0), "m1": (VerdictKind.ADMITTED, 0), "m2": (VerdictKind.ADMITTED, 0)}),
    (2, {"m0": (VerdictKind.ADMITTED, 0), "m1": (VerdictKind.ADMITTED, 0), "m2": (VerdictKind.WAITING, 1)}),
    (1, {"m0": (VerdictKind.ADMITTED, 0), "m1": (VerdictKind.WAITING, 1), "m2": (VerdictKind.WAITING, 2)}),
    (0, {"m0": (VerdictKind.ADMITTED, 0), "m1": (VerdictKind.WAITING, 1), "m2": (VerdictKind.WAITING, 2)})])
def test_a_slot_granted_but_not_taken_yet_is_taken_back_when_the_limit_no_longer_has_room_for_it(max_parallel: int, kinds: dict[str, Any]) -> None:
    """Found by the simulation: maxParallel lowered (here from 3) after m1 and m2 were granted slots, before they took
    their nodes; they took them anyway, beyond the new limit. A grant not acted on yet costs nothing to take back, the
    latest first; m0, which holds its node, keeps it."""
    node_list = [a_node("n0", holder="m0", unschedulable=True), a_node("n1"), a_node("n2")]
    nms = [an_nm("m0", "n0", created=at(0)), an_nm("m1", "n1", created=at(1)), an_nm("m2", "n2", created=at(2))]
    decision = line.decide([a_policy(maxParallel=max_parallel)], node_list, nms, admitted={"m1": "p", "m2": "p"}, now=NOW)
    assert _kinds(decision) == kinds


def test_under_window_end_pause_a_holder_evicts_nothing_until_the_next_window() -> None:
    policy = a_policy(windows=NIGHTLY, windowEnd="Pause")
    held = a_node("n0", holder="m0", unschedulable=True)
    paused = line.holding([policy], held, NOW)
    assert paused is not None and paused.kind == VerdictKind.ADMITTED and paused.paused
    assert line.decide([policy], [held], [an_nm("m0", "n0", created=at(0))], now=NOW).verdicts["m0"] == paused
    resumed = line.holding([policy], held, AT_NIGHT)
    assert resumed is not None and not resumed.paused  # resumes once one opens
    body = an_nm("m0", "n0", created=at(0), status={})
    step = terms.maintenance(body, seen_by_policies(held, paused), {}, NOW).terms
    assert step.hold == ("paused until the next maintenance window of NodeMaintenancePolicy p (windowEnd: Pause): no window is open and "
                         "the next opens at 2026-01-01T22:00:00Z; no pod is evicted until then, and node n0 stays cordoned")
    assert step.hold_recheck_in == pytest.approx(10 * 3600 + wording.WINDOW_MARGIN_SECONDS) and not step.hold_failed
    # While the window is open, the drain looks again when it closes (02:00, three hours after 23:00).
    open_step = terms.maintenance(body, seen_by_policies(held, line.holding([policy], held, AT_NIGHT)), {}, AT_NIGHT).terms
    assert not open_step.hold and open_step.hold_recheck_in == pytest.approx(3 * 3600 + wording.WINDOW_MARGIN_SECONDS)


def test_under_window_end_pause_a_slot_granted_before_the_window_closed_takes_its_node_and_evicts_nothing() -> None:
    policy = a_policy(windows=NIGHTLY, windowEnd="Pause")
    free = a_node("n1", resource_version="7")
    body = an_nm("m1", "n1", created=at(1), status={})
    verdict = line.decide([policy], [free], [body], admitted={"m1": "p"}, now=NOW).verdicts["m1"]
    assert verdict.kind == VerdictKind.ADMITTED and verdict.paused
    # The decision the slot was granted by, made while the window was open, is no licence to evict after it closed.
    for seen in (verdict, Verdict(kind=VerdictKind.ADMITTED, policy=policy)):
        taking = terms.maintenance(body, seen_by_policies(free, seen), {}, NOW)
        assert taking.terms.hold == ("paused until the next maintenance window of NodeMaintenancePolicy p (windowEnd: Pause): no window is "
                                     "open and the next opens at 2026-01-01T22:00:00Z; no pod is evicted until then, and node n1 stays cordoned")
        assert taking.terms.hold_recheck_in == pytest.approx(10 * 3600 + wording.WINDOW_MARGIN_SECONDS)
        step = plan(taking, free, [scene_pod("web-0")], [], NOW)
        assert step.node_patch is not None and step.node_patch["spec"]["unschedulable"] is True and not step.removals


def test_windows_that_cannot_be_read_never_open_and_the_policy_says_which_field_to_fix() -> None:
    policy = a_policy(windows=[*NIGHTLY, {"schedule": "0 1 * * *", "duration": "1h", "timeZone": "Mars/Olympus"}])
    decision = line.decide([policy], [a_node("n0")], [an_nm("m0", "n0", created=at(0))], now=AT_NIGHT)
    assert decision.verdicts["m0"].kind == VerdictKind.CLOSED
    assert 'its windows cannot be read (spec.windows[1].timeZone: "Mars/Olympus" is not an IANA time zone' in wording.message(decision.verdicts["m0"], "n0")
    status = policy_status.policy_status({}, decision.summaries["p"], 1, "2026-01-01T23:00:00Z")
    condition = next(c for c in status["conditions"] if c["type"] == policy_status.INVALID_WINDOWS)
    assert (condition["status"], condition["reason"]) == ("True", "UnreadableWindow")
    assert condition["message"].startswith('spec.windows[1].timeZone: "Mars/Olympus" is not an IANA time zone; use a name such as "Europe/Berlin"')
    assert status["windowOpen"] is False and status["nextWindow"] is None and status["windowCloses"] is None


def test_the_policy_status_tells_whether_a_window_is_open_when_it_closes_and_when_the_next_opens() -> None:
    def status(policy: model.Policy, now: datetime.datetime) -> dict[str, Any]:
        return policy_status.policy_status({}, line.decide([policy], [a_node("n0")], [], now=now).summaries["p"], 1, "2026-01-01T12:00:00Z")

    windowed = a_policy(windows=NIGHTLY)
    assert {k: status(windowed, NOW)[k] for k in ("windowOpen", "nextWindow", "windowCloses")} == {
        "windowOpen": False, "nextWindow": "2026-01-01T22:00:00Z", "windowCloses": None}
    assert {k: status(windowed, AT_NIGHT)[k] for k in ("windowOpen", "nextWindow", "windowCloses")} == {
        "windowOpen": True, "nextWindow": "2026-01-02T22:00:00Z", "windowCloses": "2026-01-02T02:00:00Z"}
    always = status(a_policy(), NOW)
    assert always["windowOpen"] is True and always["nextWindow"] is None and always["windowCloses"] is None
    assert next(c for c in always["conditions"] if c["type"] == policy_status.INVALID_WINDOWS)["status"] == "False"


# ----------------------------------------------------------------- topology limits
def zoned(name: str, zone: str | None, **extra: Any) -> dict[str, Any]:
    return a_node(name, labels={"pool": "a", **({"zone": zone} if zone else {})}, **extra)


def test_a_full_domain_keeps_only_its_own_later_maintenances_waiting() -> None:
    node_list = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("b2", "b"), zoned("c1", "c")]
    nms = [an_nm(f"m-{n['metadata']['name']}", n["metadata"]["name"], created=at(i)) for i, n in enumerate(node_list)]
    decision = line.decide([a_policy(topologyLimits=[{"topologyKey": "zone", "maxParallel": 1}])], node_list, nms, now=NOW)
    assert _kinds(decision) == {"m-a1": (VerdictKind.ADMITTED, 0), "m-a2": (VerdictKind.WAITING, 1), "m-b1": (VerdictKind.ADMITTED, 0),
                                "m-b2": (VerdictKind.WAITING, 2), "m-c1": (VerdictKind.ADMITTED, 0)}
    assert wording.message(decision.verdicts["m-a2"], "a2") == ("waiting for a slot of NodeMaintenancePolicy p (topology domain zone=a is full: "
                                                      "maxParallel 1 of its 2 nodes in maintenance): its place in line is in the policy's "
                                                      "status.queue; the node is not touched until then")


def test_topology_limits_hold_on_top_of_the_pool_s_and_the_pool_s_keep_everyone_in_order() -> None:
    # The pool takes two: a1 and b1; b2's domain has room but the pool is full, so c1 waits behind it too.
    node_list = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("b2", "b"), zoned("c1", "c")]
    nms = [an_nm("m-a1", "a1", created=at(0)), an_nm("m-a2", "a2", created=at(1)), an_nm("m-b1", "b1", created=at(2)),
           an_nm("m-b2", "b2", created=at(3)), an_nm("m-c1", "c1", created=at(4))]
    policy = a_policy(maxParallel=2, topologyLimits=[{"topologyKey": "zone", "maxParallel": 1}])
    assert _kinds(line.decide([policy], node_list, nms, now=NOW)) == {
        "m-a1": (VerdictKind.ADMITTED, 0), "m-a2": (VerdictKind.WAITING, 1), "m-b1": (VerdictKind.ADMITTED, 0), "m-b2": (VerdictKind.WAITING, 2),
        "m-c1": (VerdictKind.WAITING, 3)}


@pytest.mark.parametrize(
    ("limit", "node_list", "expected"),
    [
        # A percentage is of the domain's selected nodes: 50% of zone a's four is 2, of zone b's one is 1.
        ({"maxParallel": "50%"}, [zoned(f"a{i}", "a") for i in range(4)] + [zoned("b0", "b")],
         {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.ADMITTED, 0), "m-a2": (VerdictKind.WAITING, 1), "m-a3": (VerdictKind.WAITING, 2),
          "m-b0": (VerdictKind.ADMITTED, 0)}),
        # maxUnavailable counts the domain's nodes out of service for any reason; a node already down adds nothing.
        ({"maxUnavailable": 1}, [zoned("a0", "a", ready=False), zoned("a1", "a"), zoned("b0", "b")],
         {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.WAITING, 1), "m-b0": (VerdictKind.ADMITTED, 0)}),
        # A node in maintenance already fills its domain.
        ({"maxParallel": 1}, [zoned("a0", "a", holder="m-a0", unschedulable=True), zoned("a1", "a"), zoned("b0", "b")],
         {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.WAITING, 1), "m-b0": (VerdictKind.ADMITTED, 0)}),
        # A node without the label is in no domain of the key: its limits do not apply to it.
        ({"maxParallel": 1}, [zoned("a0", "a"), zoned("a1", "a"), zoned("x0", None), zoned("x1", None)],
         {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.WAITING, 1), "m-x0": (VerdictKind.ADMITTED, 0), "m-x1": (VerdictKind.ADMITTED, 0)}),
    ],
)
def test_topology_limits_per_domain(limit: dict[str, Any], node_list: list[dict[str, Any]], expected: dict[str, tuple[str, int]]) -> None:
    nms = [an_nm(f"m-{n['metadata']['name']}", n["metadata"]["name"], created=at(i)) for i, n in enumerate(node_list)]
    decision = line.decide([a_policy(topologyLimits=[{"topologyKey": "zone", **limit}])], node_list, nms, now=NOW)
    assert _kinds(decision) == expected


@pytest.mark.parametrize(("limit", "kinds"), [
    ({"maxParallel": 3}, {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.ADMITTED, 0), "m-a2": (VerdictKind.ADMITTED, 0),
                          "m-b0": (VerdictKind.ADMITTED, 0)}),
    ({"maxParallel": 2}, {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.ADMITTED, 0), "m-a2": (VerdictKind.WAITING, 1),
                          "m-b0": (VerdictKind.ADMITTED, 0)}),
    ({"maxParallel": 1}, {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.WAITING, 1), "m-a2": (VerdictKind.WAITING, 2),
                          "m-b0": (VerdictKind.ADMITTED, 0)}),
    ({"maxUnavailable": 1}, {"m-a0": (VerdictKind.ADMITTED, 0), "m-a1": (VerdictKind.WAITING, 1), "m-a2": (VerdictKind.WAITING, 2),
                             "m-b0": (VerdictKind.ADMITTED, 0)}),
])
def test_a_slot_granted_but_not_taken_yet_is_taken_back_when_its_domain_no_longer_has_room_for_it(limit: dict[str, Any], kinds: dict[str, Any]) -> None:
    """Found by the search (seed 3410207015 of Closing): a topology limit added (here one per zone) after m-a1 and m-a2
    were granted slots in zone a, before they took their nodes; both took them, two in a zone whose limit allows one.
    As with the pool's limits, the latest grants of a domain without room are taken back; m-a0, which holds its node,
    keeps it, and m-b0's zone has room."""
    node_list = [zoned("a0", "a", holder="m-a0", unschedulable=True), zoned("a1", "a"), zoned("a2", "a"), zoned("b0", "b")]
    nms = [an_nm(f"m-{n['metadata']['name']}", n["metadata"]["name"], created=at(i)) for i, n in enumerate(node_list)]
    decision = line.decide([a_policy(topologyLimits=[{"topologyKey": "zone", **limit}])], node_list, nms,
                           admitted={"m-a1": "p", "m-a2": "p", "m-b0": "p"}, now=NOW)
    assert _kinds(decision) == kinds


def test_a_slot_granted_before_counts_in_its_domain() -> None:
    node_list = [zoned("a0", "a"), zoned("a1", "a")]
    nms = [an_nm("m-a1", "a1", created=at(0)), an_nm("m-a0", "a0", created=at(1))]
    decision = line.decide([a_policy(topologyLimits=[{"topologyKey": "zone", "maxParallel": 1}])], node_list, nms, admitted={"m-a0": "p"}, now=NOW)
    assert _kinds(decision) == {"m-a1": (VerdictKind.WAITING, 1), "m-a0": (VerdictKind.ADMITTED, 0)}


def test_a_recovering_node_that_left_the_pool_keeps_its_slot_and_its_domain_only_while_the_domain_exists() -> None:
    # c1 was given back and its workloads are not healthy yet (waitForHealthy); it then left pool a, where it was alone
    # in zone c. Its slot stays in use pool-wide, zone c is gone, and the decision goes on for every policy.
    left = a_node("c1", labels={"pool": "b", "zone": "c"})
    node_list = [zoned("a1", "a"), zoned("a2", "a"), left, a_node("b1", labels={"pool": "b"})]
    nms = [an_nm("m-a1", "a1", created=at(0)), an_nm("m-b1", "b1", created=at(1))]
    other = a_policy("q", {"matchLabels": {"pool": "b"}})
    zones = [{"topologyKey": "zone", "maxParallel": 1}]
    decision = line.decide([a_policy(maxParallel=2, topologyLimits=zones), other], node_list, nms, recovering={"p": ["c1"]}, now=NOW)
    assert _kinds(decision) == {"m-a1": (VerdictKind.ADMITTED, 0), "m-b1": (VerdictKind.ADMITTED, 0)}
    full = line.decide([a_policy(maxParallel=1, topologyLimits=zones), other], node_list, nms, recovering={"p": ["c1"]}, now=NOW)
    assert _kinds(full) == {"m-a1": (VerdictKind.WAITING, 1), "m-b1": (VerdictKind.ADMITTED, 0)}
    # In a zone that still holds selected nodes, it keeps its slot there too.
    moved = [*node_list[:2], a_node("c1", labels={"pool": "b", "zone": "a"}), node_list[3]]
    in_zone_a = line.decide([a_policy(maxParallel=2, topologyLimits=zones), other], moved, nms, recovering={"p": ["c1"]}, now=NOW)
    assert _kinds(in_zone_a) == {"m-a1": (VerdictKind.WAITING, 1), "m-b1": (VerdictKind.ADMITTED, 0)}


# ----------------------------------------------------------------- the policy a node was taken under
POOL_B = {"matchLabels": {"pool": "b"}}
CACHE_SKIP = [{"podSelector": {"matchLabels": {"app": "cache"}}, "behavior": "Skip"}]


def test_a_node_relabelled_out_of_its_pool_while_held_still_counts_against_the_policy_it_was_taken_under() -> None:
    # m0 took n0 under p (maxParallel 1); then n0 was relabelled out of pool a. Its maintenance still holds a slot of p.
    relabelled = a_node("n0", labels={"pool": "gone"}, holder="m0", policy="p", unschedulable=True)
    nms = [an_nm("m0", "n0", created=at(1)), an_nm("m1", "n1", created=at(2))]
    decision = line.decide([a_policy(maxParallel=1)], [relabelled, a_node("n1")], nms, now=NOW)
    assert _kinds(decision) == {"m0": ("Admitted", 0), "m1": ("Waiting", 1)}
    assert decision.summaries["p"].in_maintenance == 1
    # Given back (the record goes with the holder), the node is no longer p's and frees the slot.
    back = a_node("n0", labels={"pool": "gone"})
    assert line.decide([a_policy(maxParallel=1)], [back, a_node("n1")], nms[1:], now=NOW).verdicts["m1"].kind == VerdictKind.ADMITTED


def test_the_drain_of_a_node_relabelled_out_of_its_pool_keeps_its_policy_s_rules() -> None:
    policy = a_policy(drainRules=CACHE_SKIP)
    relabelled = a_node("n1", labels={"pool": "gone"}, holder="nm", policy="p", unschedulable=True, resource_version="7",
                        taints=[{"key": "kubevirt.io/drain", "effect": "NoSchedule"}])
    verdict = line.holding([policy], relabelled, NOW)
    assert verdict is not None and verdict.policy == policy
    body = an_nm("nm", "n1", created=at(1), status={"phase": "Running", "drainStartTime": "2026-01-01T11:59:00Z"})
    step = terms.maintenance(body, seen_by_policies(relabelled, verdict), {}, NOW)
    decided = plan(step, relabelled, [scene_pod("cache-0", labels={"app": "cache"}), scene_pod("web-0", labels={"app": "web"})], [], NOW)
    assert [r.name for r in decided.removals] == ["web-0"]  # the Skip rule keeps the cache pod


def test_a_node_relabelled_into_another_pool_while_held_is_a_conflict_that_holds_its_drain() -> None:
    moved = a_node("n0", labels={"pool": "b"}, holder="m0", policy="p", unschedulable=True)
    policies = [a_policy("p", maxParallel=1), a_policy("q", POOL_B, maxParallel=1)]
    decision = line.decide(policies, [moved, a_node("n1", labels={"pool": "b"})], [an_nm("m0", "n0", created=at(1)),
                                                                                    an_nm("m1", "n1", created=at(2))], now=NOW)
    assert decision.verdicts["m0"].kind == VerdictKind.CONFLICT and decision.verdicts["m0"].policies == ("p", "q")
    assert decision.summaries["q"].in_maintenance == 1 and decision.verdicts["m1"].kind == VerdictKind.WAITING
    assert line.holding(policies, moved, NOW) == decision.verdicts["m0"]


def test_a_slot_granted_under_one_policy_is_no_slot_under_another() -> None:
    # p granted m1 a slot for n1; before m1 took it, n1 was relabelled into pool b, whose policy q is full.
    moved = a_node("n1", labels={"pool": "b"})
    policies = [a_policy("p", maxParallel=1), a_policy("q", POOL_B, maxParallel=1)]
    node_list = [moved, a_node("n2", labels={"pool": "b"}, holder="m2", unschedulable=True)]
    decision = line.decide(policies, node_list, [an_nm("m1", "n1", created=at(1)), an_nm("m2", "n2", created=at(2))],
                           admitted={"m1": "p"}, now=NOW)
    assert decision.verdicts["m1"].kind == VerdictKind.WAITING and decision.verdicts["m1"].policy == policies[1]
    assert decision.summaries["q"].in_maintenance == 1

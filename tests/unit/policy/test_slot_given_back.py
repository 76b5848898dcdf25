"""A maintenance granted a slot that a check at takeover refuses (another holder's remediation Lease, the
etcd-quorum guard) gives the slot back, and rejoins the line once the check passes, without ever taking a
slot granted meanwhile to another: decisions, the policies' terms and planner together, as the runtime chains them."""

from __future__ import annotations

from functools import partial
from typing import Any

from node_maintenance.coordination import quorum, remediation
from node_maintenance.drain.planner import plan
from node_maintenance.drain.plans import Maintenance, Plan
from node_maintenance.policy import line, model, terms
from node_maintenance.policy.verdicts import Decision, Verdict, VerdictKind
from tests.unit.builders import CONTROL_PLANE_LABEL, NOW, control_plane_node, lease, nm, nm_policy, node, seen_by_policies

POOL = {"pool": "a"}
POLICY = nm_policy("rolling", node_selector={"matchLabels": POOL}, maxParallel=1)
pool_node = partial(node, labels=POOL, annotations={}, unschedulable=False, ready=True)
NODES = [pool_node("Worker-1", uid="u1", resource_version="7"), pool_node("Worker-2", uid="u2", resource_version="7")]
LEASES = "medik8s-leases"
HELD_BY_OTHER = remediation.LeaseView(LEASES, "Worker-1", due=True, read=lease("NodeHealthCheck", 10))
RELEASED = remediation.LeaseView(LEASES, "Worker-1", due=True, read=None)


def _nm(name: str, node_name: str, second: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return nm(name, node_name, uid=f"uid-{name}", created=f"2026-01-01T10:00:{second:02d}Z", status=status or {})


def _decide(maintenances: list[dict[str, Any]], admitted: frozenset[str], node_list: list[dict[str, Any]] = NODES) -> Decision:
    """The decision as the runtime makes it: from the slim objects its watches keep, the slots ``admitted`` granted by the policy."""
    policy = model.Policy.of(POLICY)
    return line.decide([policy], [model.slim_node(n) for n in node_list], [model.slim_maintenance(m) for m in maintenances],
                       dict.fromkeys(admitted, policy.name), now=NOW)


def _kinds(decision: Decision) -> dict[str, str]:
    return {name: verdict.kind for name, verdict in decision.verdicts.items()}


def _terms(body: dict[str, Any], decision: Decision, node_obj: dict[str, Any]) -> Maintenance:
    return terms.maintenance(body, seen_by_policies(node_obj, decision.verdicts.get(body["metadata"]["name"])), {}, NOW)


def _step(body: dict[str, Any], decision: Decision, node_obj: dict[str, Any], **inputs: Any) -> Plan | None:
    """One drain step: the policies' terms, then the plan (None: the terms say to do nothing yet)."""
    step = _terms(body, decision, node_obj)
    if step.terms.undecided:
        return None
    return plan(step, node_obj, [], [], NOW, holder_exists=False, **inputs)


def _queued(status: dict[str, Any]) -> tuple[str, str]:
    queued = next(c for c in status["conditions"] if c["type"] == model.QUEUED)
    return queued["status"], queued["reason"]


def test_a_slot_refused_at_takeover_goes_to_the_next_in_line_and_the_first_rejoins_behind_it() -> None:
    a, b = _nm("a", "Worker-1", 1), _nm("b", "Worker-2", 2)
    first = _decide([a, b], frozenset())
    assert _kinds(first) == {"a": VerdictKind.ADMITTED, "b": VerdictKind.WAITING}

    # Another holder's remediation Lease refuses a's node: a fails before taking it, and gives the slot back.
    refused = _step(a, first, NODES[0], lease=HELD_BY_OTHER)
    assert refused is not None and refused.node_patch is None and refused.lease_claim is None and not refused.holds_node
    assert refused.phase == "Failed" and _queued(refused.status) == ("True", model.QueuedReason.SLOT_GIVEN_BACK)
    assert model.gave_back({"status": refused.status})
    a = {**a, "status": refused.status}
    # Until the decision has seen that, a grant made before does not let a take its node, even once the Lease is free.
    assert _step(a, first, NODES[0], lease=RELEASED) is None

    second = _decide([a, b], frozenset({"a"}))
    assert _kinds(second) == {"a": VerdictKind.GIVEN_BACK, "b": VerdictKind.ADMITTED}
    assert second.summaries["rolling"].queue == ()
    # Still refused, a looks again and keeps the slot given back.
    again = _step(a, second, NODES[0], lease=HELD_BY_OTHER)
    assert again is not None and again.node_patch is None and _queued(again.status) == ("True", model.QueuedReason.SLOT_GIVEN_BACK)

    # The Lease is free: a rejoins the line, taking nothing; b, granted meanwhile, keeps its slot.
    rejoined = _step(a, second, NODES[0], lease=RELEASED)
    assert rejoined is not None and rejoined.phase == "Pending" and rejoined.node_patch is None and rejoined.lease_claim is None
    assert _queued(rejoined.status) == ("True", "WaitingForSlot") and not model.gave_back({"status": rejoined.status})
    a = {**a, "status": rejoined.status}
    third = _decide([a, b], frozenset({"b"}))
    assert _kinds(third) == {"a": VerdictKind.WAITING, "b": VerdictKind.ADMITTED}
    assert _step(a, third, NODES[0], lease=RELEASED).node_patch is None  # type: ignore[union-attr]

    # b takes its node, drains and is deleted: a, first in line, gets the slot and takes its node.
    holding = [NODES[0], pool_node("Worker-2", holder="b", unschedulable=True)]
    assert _kinds(_decide([a, b], frozenset({"b"}), holding)) == {"a": VerdictKind.WAITING, "b": VerdictKind.ADMITTED}
    last = _decide([a], frozenset({"b"}))
    assert _kinds(last) == {"a": VerdictKind.ADMITTED}
    claim = _step(a, last, NODES[0], lease=RELEASED)
    # The Lease is claimed, and the node taken right after it in the same step.
    assert claim is not None and claim.lease_claim is not None and claim.lease_claim.before_take and claim.node_patch is not None


def test_without_the_grant_standing_the_rejoining_one_would_take_the_slot_of_one_taking_its_node() -> None:
    # What the standing grant prevents: from the cluster alone, a (earlier) would be granted and b's grant
    # withdrawn, while b's engine may be cordoning its node at that moment.
    a = _nm("a", "Worker-1", 1, status={"phase": "Pending"})
    b = _nm("b", "Worker-2", 2)
    assert _kinds(_decide([a, b], frozenset())) == {"a": VerdictKind.ADMITTED, "b": VerdictKind.WAITING}
    assert _kinds(_decide([a, b], frozenset({"b"}))) == {"a": VerdictKind.WAITING, "b": VerdictKind.ADMITTED}


def test_a_grant_stands_only_while_its_maintenance_waits_to_take_the_node() -> None:
    a, b, c = _nm("a", "Worker-1", 1), _nm("b", "Worker-2", 2), _nm("c", "Worker-3", 3)
    node_list = [*NODES, pool_node("Worker-3")]
    # A name granted before that is gone, or holds its node now, counts once and only as what it is.
    assert _kinds(_decide([a, b, c], frozenset({"gone", "a"}), node_list)) == {
        "a": VerdictKind.ADMITTED, "b": VerdictKind.WAITING, "c": VerdictKind.WAITING}
    holding = [pool_node("Worker-1", holder="a", unschedulable=True), NODES[1], node_list[2]]
    assert _kinds(_decide([a, b, c], frozenset({"a"}), holding)) == {"a": VerdictKind.ADMITTED, "b": VerdictKind.WAITING, "c": VerdictKind.WAITING}


def test_the_quorum_guard_refusing_at_takeover_gives_the_slot_back_too() -> None:
    policy = nm_policy("rolling", node_selector={"matchLabels": {CONTROL_PLANE_LABEL: ""}}, maxParallel=1)
    m1 = control_plane_node("m1", uid="u1", resource_version="1", annotations={})
    members = quorum.Members((m1, control_plane_node("m2", holder="other"), control_plane_node("m3")))
    body = _nm("cp", "m1", 1)
    verdict = Verdict(VerdictKind.ADMITTED, model.Policy.of(policy))
    step = terms.maintenance(body, seen_by_policies(m1, verdict), {}, NOW)
    held = plan(step, m1, [], [], NOW, holder_exists=False, members=members)
    assert held.phase == "Pending" and held.node_patch is None and _queued(held.status) == ("True", model.QueuedReason.SLOT_GIVEN_BACK)
    assert next(c for c in held.status["conditions"] if c["type"] == quorum.CONDITION)["reason"] == "WouldBreakEtcdQuorum"

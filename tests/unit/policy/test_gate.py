"""What the policies mean for one drain step when the decision has no word on the maintenance."""

from __future__ import annotations

from node_maintenance.policy import decide as pol
from node_maintenance.policy.gate import Gate, Seen, gate
from tests.unit.builders import HELD, NOW, nm, nm_policy

RULES = {"drainRules": [{"podSelector": {"matchLabels": {"tier": "cache"}}, "behavior": "Skip"}]}


def test_a_selected_maintenance_without_a_verdict_does_nothing_rather_than_drain_as_ungoverned() -> None:
    # Being deleted, it left the decision's line while its engine may still run a step: that step must not drain
    # the node without the policy's rules (it evicted a pod a Skip rule kept, in the queue-under-faults test).
    body = nm("nm", "n1", uid="1234", status={"phase": "Succeeded"})
    for listed in (True, False):
        step = gate(body, HELD, Seen(verdict=None, listed=listed, selected=True), "nmo", NOW)
        assert step.unknown and step.policy is None and step.waiting is None
    # No policy selects the node: no policy applies.
    assert gate(body, HELD, Seen(verdict=None, listed=True, selected=False), "nmo", NOW) == Gate()


def test_an_admitted_maintenance_drains_by_its_policy_s_rules() -> None:
    policy = pol.Policy.of(nm_policy("rolling", **RULES))
    step = gate(nm("nm", "n1", uid="1234", status={}), HELD, Seen(pol.Verdict(pol.ADMITTED, policy), listed=True, selected=True), "nmo", NOW)
    assert step.maintenance(nm("nm", "n1", uid="1234", status={})).terms.rules == policy.rules


def test_only_a_drain_under_wait_for_healthy_records_what_it_evicts() -> None:
    body = nm("nm", "n1", uid="1234", status={})
    for spec, records in (({"waitForHealthy": True}, True), ({}, False)):
        verdict = pol.Verdict(pol.ADMITTED, pol.Policy.of(nm_policy("rolling", **spec)))
        assert gate(body, HELD, Seen(verdict, listed=True, selected=True), "nmo", NOW).maintenance(body).terms.records_evicted is records
    assert not Gate().maintenance(body).terms.records_evicted  # no policy governs the node

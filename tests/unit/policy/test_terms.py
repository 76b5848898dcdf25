"""The one seam between a maintenance and its policies: what they know of it, turned into the planner's input. A
maintenance the decision has no word on does nothing rather than drain as if ungoverned; an admitted one drains by its
policy's rules and defaults; one in line carries out the wait; while the policies are unknown, one in line waits and a
holder evicts nothing."""

from __future__ import annotations

from typing import Any

from node_maintenance.drain import planner
from node_maintenance.drain.plans import PolicyTerms
from node_maintenance.policy import model, terms
from node_maintenance.policy.verdicts import Verdict, VerdictKind
from tests.unit.builders import HELD, NOW, nm, nm_policy, node, seen_by_policies

RULES: dict[str, Any] = {"drainRules": [{"podSelector": {"matchLabels": {"tier": "cache"}}, "behavior": "Skip"}]}


def test_a_selected_maintenance_without_a_verdict_does_nothing_rather_than_drain_as_ungoverned() -> None:
    # Being deleted, it left the decision's line while its engine may still run a step: that step must not drain
    # the node without the policy's rules (it evicted a pod a Skip rule kept, in the queue-under-faults test).
    body = nm("nm", "n1", uid="1234", status={"phase": "Succeeded"})
    for listed in (True, False):
        step = terms.maintenance(body, seen_by_policies(HELD, None, listed=listed, selected=True), {}, NOW)
        assert step.terms.undecided and step.terms.rules is None and step.terms.waiting is None
    # No policy selects the node: no policy applies.
    assert terms.maintenance(body, seen_by_policies(HELD, None, selected=False), {}, NOW).terms == PolicyTerms()


def test_an_admitted_maintenance_drains_by_its_policy_s_rules_and_drain_defaults() -> None:
    policy = model.Policy.of(nm_policy("rolling", drain={"gracePeriodSeconds": 7}, **RULES))
    step = terms.maintenance(nm("nm", "n1", uid="1234", status={}), seen_by_policies(HELD, Verdict(kind=VerdictKind.ADMITTED, policy=policy)), {}, NOW)
    assert step.terms.rules == policy.rules and step.grace == 7


def test_one_in_line_carries_out_the_wait_and_touches_nothing() -> None:
    policy = model.Policy.of(nm_policy("rolling", maxParallel=1))
    verdict = Verdict(kind=VerdictKind.WAITING, policy=policy, position=2, queued=3)
    step = terms.maintenance(nm("nm", "n1", uid="1234", status={}), seen_by_policies(node("n1"), verdict), {}, NOW)
    assert step.terms.waiting is not None and step.terms.waiting.node_patch is None and not step.terms.waiting.removals
    assert "waiting for a slot of NodeMaintenancePolicy rolling" in planner.plan(step, None, [], [], NOW).status["conditions"][0]["message"]


def test_while_the_policies_are_unknown_one_in_line_waits_and_a_holder_evicts_nothing() -> None:
    why = "the nodes have not been listed yet"
    waiting = terms.maintenance(nm("nm", "n1", uid="1234", status={}), terms.Seen(node("n1"), unknown=why, served=True), {}, NOW)
    assert waiting.terms.waiting is not None and why in planner.plan(waiting, None, [], [], NOW).status["conditions"][0]["message"]
    holder = terms.maintenance(nm("nm", "n1", uid="1234", status={}), terms.Seen(HELD, unknown=why, served=True), {}, NOW)
    assert holder.terms.waiting is None and why in holder.terms.hold and holder.terms.hold_recheck_in == terms.UNKNOWN_RECHECK_SECONDS
    # In line, its node not listed by the policies yet: nothing is done, and it looks again.
    unseen = terms.maintenance(nm("nm", "n1", uid="1234", status={}), terms.Seen(None, unknown=why), {}, NOW)
    assert unseen.terms.undecided and unseen.terms.hold_recheck_in == terms.UNKNOWN_RECHECK_SECONDS

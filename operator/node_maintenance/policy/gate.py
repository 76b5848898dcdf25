"""What the policies mean for one step of one drain: a pure function of what the policies' watches show.

The gate reads; it writes nothing. A hook Job the maintenance needs and that does not exist yet is
named in :attr:`Gate.jobs`, and the drain's plan asks the executor to create it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from node_maintenance.api.conditions import Condition
from node_maintenance.drain import node as nodes
from node_maintenance.drain.plans import Maintenance, Plan, PolicyTerms
from node_maintenance.policy import decide as pol
from node_maintenance.policy import hooks

# A hook Job in this state is looked at again this often (its watch may miss nothing, but a Job that
# cannot be created is tried again at this pace).
HOOK_RECHECK_SECONDS = {hooks.RUNNING: 2.0, hooks.MISSING: 1.0, hooks.FAILED: 10.0}
# A drain held while the policies cannot be read looks again this often (their recovery also wakes it).
UNKNOWN_RECHECK_SECONDS = 5.0
# A maintenance that gave its slot back waits this long at most for the decision to have seen that.
GIVEN_BACK_RECHECK_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class Gate:
    """What the policies mean for one step of a drain."""

    waiting: Plan | None = None  # waiting for a slot or a conflict's end: carry this out instead of a drain
    unknown: bool = False  # the policies' watch has not brought this maintenance yet: do nothing until it has
    policy: pol.Policy | None = None
    hold: str = ""  # why no pod may be evicted yet (a preDrain Job)
    hold_failed: bool = False
    conditions: tuple[Condition, ...] = ()
    jobs: tuple[Mapping[str, Any], ...] = ()  # hook Jobs to create
    recheck_in: float | None = None
    given_back: Condition | None = None  # the Queued condition a refusal at takeover records: the slot goes back
    rejoin: Plan | None = None  # the slot was given back and the node may be taken now: back in the queue instead

    def maintenance(self, body: Mapping[str, Any]) -> Maintenance:
        """The planner's view: the policy's drain defaults, rules, hold, conditions and Jobs, when one governs the node."""
        if self.policy is None:
            return dataclasses.replace(Maintenance.of(body), terms=PolicyTerms(hold=self.hold, hold_recheck_in=self.recheck_in, conditions=self.conditions))
        return dataclasses.replace(Maintenance.of(pol.with_defaults(body, self.policy)), terms=PolicyTerms(
            rules=self.policy.rules, hold=self.hold, hold_failed=self.hold_failed, hold_recheck_in=self.recheck_in, conditions=self.conditions,
            jobs=self.jobs, given_back=self.given_back, rejoin=self.rejoin, records_evicted=self.policy.wait_for_healthy))


@dataclasses.dataclass(frozen=True)
class Seen:
    """What the policies' watches show of one maintenance."""

    verdict: pol.Verdict | None
    listed: bool  # the maintenances' watch has brought it
    selected: bool  # a policy selects its node
    pre_drain_job: Mapping[str, Any] | None = None  # its preDrain Job, if one exists
    refused: str = ""  # why the API refused to create that Job at the last try


def gate(body: Mapping[str, Any], node: Mapping[str, Any], seen: Seen, namespace: str, now: datetime.datetime) -> Gate:
    """The policies' say in one drain step of ``body`` (in v1beta1, its stored status merged in)."""
    name = body["metadata"]["name"]
    verdict = seen.verdict
    # A policy selects the node, yet the decision has no word on this maintenance: not listed yet, or being
    # deleted (it left the line). Decided once it has: never drained meanwhile as if no policy applied.
    if verdict is None and seen.selected:
        return Gate(unknown=True, recheck_in=HOOK_RECHECK_SECONDS[hooks.MISSING])
    if verdict is None or verdict.policy is None or verdict.kind == pol.UNGOVERNED:
        return Gate(conditions=pol.left_line(body.get("status") or {}))
    holds = nodes.holder_of(dict(node)) == name
    if not holds and verdict.kind in (pol.WAITING, pol.CLOSED, pol.CONFLICT):
        return Gate(waiting=pol.waiting_plan(body, verdict, now))
    policy = verdict.policy
    node_name = body["spec"]["nodeName"]
    queued = pol.queued_condition(verdict, node_name)
    # A slot given back stays given back until the decision has seen it: a grant made before must not take the node.
    if not holds and pol.gave_back(body) and verdict.kind != pol.GIVEN_BACK:
        return Gate(unknown=True, recheck_in=GIVEN_BACK_RECHECK_SECONDS)
    given_back = None if holds else pol.queued_condition(pol.Verdict(pol.GIVEN_BACK, policy), node_name)
    if verdict.kind == pol.GIVEN_BACK:  # the checks at takeover are made again; passed, it rejoins the queue
        return Gate(policy=policy, conditions=(queued,), given_back=given_back,
                    rejoin=pol.waiting_plan(body, pol.Verdict(pol.WAITING, policy), now))
    if verdict.kind == pol.CONFLICT:  # taken before the second policy appeared: evict nothing until it is resolved
        return Gate(policy=policy, conditions=(queued,), hold=verdict.message(body["spec"]["nodeName"]), hold_failed=True)
    if holds and verdict.paused:  # windowEnd Pause and no window open: evict nothing until the next opens
        return Gate(policy=policy, conditions=(queued,), hold=verdict.pause(node_name), recheck_in=pol.until(verdict.opens, now))
    # Under windowEnd Pause, the drain looks again when the open window closes.
    closing = pol.until(window.closes, now) if policy.window_end == pol.PAUSE and (window := policy.window(now)) else None
    if policy.pre_drain is None:
        return Gate(policy=policy, conditions=(queued,), given_back=given_back, recheck_in=closing)
    if not holds:
        return Gate(policy=policy, conditions=(queued,), given_back=given_back, hold="the preDrain Job starts once the node is cordoned")
    hook = hooks.standing(hooks.PRE_DRAIN, policy.name, policy.pre_drain, body, seen.pre_drain_job, namespace, seen.refused)
    outcome = hook.outcome
    conditions = (queued, pol.hook_condition(hooks.PRE_DRAIN, outcome))
    if outcome.state == hooks.SUCCEEDED:
        return Gate(policy=policy, conditions=conditions, recheck_in=closing)
    return Gate(policy=policy, conditions=conditions, jobs=(hook.create,) if hook.create else (), hold=outcome.message,
                hold_failed=outcome.state == hooks.FAILED, recheck_in=HOOK_RECHECK_SECONDS[outcome.state])


def unknown(body: Mapping[str, Any], node: Mapping[str, Any], why: str, now: datetime.datetime) -> Gate:
    """The policies cannot be read (not yet, or not now): hold. A maintenance that has not taken its node waits
    without touching it; one that holds it keeps it and evicts nothing, since its rules and hooks are not known."""
    verdict = pol.Verdict(pol.UNKNOWN, why=why)
    if nodes.holder_of(dict(node)) != body["metadata"]["name"]:
        return Gate(waiting=pol.waiting_plan(body, verdict, now))
    return Gate(hold=verdict.message(body["spec"]["nodeName"]), recheck_in=UNKNOWN_RECHECK_SECONDS)

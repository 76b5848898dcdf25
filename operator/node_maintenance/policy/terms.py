"""The one seam between a maintenance and its policies: what the policies know of it (:class:`Seen`, a frozen snapshot
the runtime takes once per drain step) turned into the planner's input by one pure function, :func:`maintenance`.

It reads; it writes nothing. A hook Job the maintenance needs and that does not exist yet is named in the terms'
``jobs``, and the drain's plan asks the executor to create it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from node_maintenance.api.conditions import Condition
from node_maintenance.drain import nodes
from node_maintenance.drain.plans import Maintenance, PolicyTerms
from node_maintenance.policy import hooks, line, model, wording
from node_maintenance.policy.verdicts import Verdict, VerdictKind

# A hook Job in this state is looked at again this often (its watch may miss nothing, but a Job that
# cannot be created is tried again at this pace).
HOOK_RECHECK_SECONDS = {hooks.JobState.RUNNING: 2.0, hooks.JobState.MISSING: 1.0, hooks.JobState.FAILED: 10.0}
# A drain held while the policies cannot be read looks again this often (their recovery also wakes it).
UNKNOWN_RECHECK_SECONDS = 5.0
# A maintenance that gave its slot back waits this long at most for the decision to have seen that.
GIVEN_BACK_RECHECK_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class Seen:
    """What the policies know of one maintenance at one moment."""

    node: Mapping[str, Any] | None  # the node its say is judged on (None: not listed yet)
    unknown: str = ""  # why the policies are not known now ("" when they are)
    served: bool = False  # the policy CRD is served and watched
    synced: bool = False  # every watch has listed once (and knew the holder's policy): a holder keeps the rules last read while they are unknown
    verdict: Verdict | None = None
    listed: bool = False  # the maintenances' watch has brought it
    selected: bool = False  # a policy selects its node
    operator_namespace: str = ""  # the operator's own, where no hook Job ever runs
    pre_drain_job: Mapping[str, Any] | None = None  # its preDrain Job, if one exists


def maintenance(body: Mapping[str, Any], seen: Seen, refused_jobs: Mapping[str, str], now: datetime.datetime) -> Maintenance:
    """The planner's view of ``body`` (in v1beta1, its stored status merged in) under what the policies know of it:
    the policy's drain defaults, rules, hold, conditions and Jobs when one governs the node, or the wait to carry out
    instead of a drain. ``refused_jobs``: why the API refused each hook Job at the last try."""
    policy, policy_terms = _terms(body, seen, refused_jobs, now)
    return governed(body, policy, policy_terms)


def governed(body: Mapping[str, Any], policy: model.Policy | None, policy_terms: PolicyTerms) -> Maintenance:
    """``body`` as the planner reads it under ``policy`` (None: none governs it) and its terms: the policy's drain defaults
    filled in, the escalation ladder, its own or inherited, capped by the policy's maxEscalation, and the status told
    which steps the cap dropped (EscalationCapped)."""
    m = Maintenance.of(model.with_defaults(body, policy) if policy else body)
    ladder = policy.capped(m.escalation) if policy else m.escalation
    if policy and policy.max_escalation and ladder != m.escalation:
        dropped = tuple(step for step in m.escalation if step not in ladder)
        told: tuple[Condition, ...] = (wording.escalation_capped(policy.name, policy.max_escalation, dropped),)
    else:
        told = wording.escalation_uncapped(m.status)
    return dataclasses.replace(m, escalation=ladder, terms=dataclasses.replace(policy_terms, policy=policy.name if policy else None,
                                                                               conditions=policy_terms.conditions + told))


def _terms(body: Mapping[str, Any], seen: Seen, refused_jobs: Mapping[str, str], now: datetime.datetime) -> tuple[model.Policy | None, PolicyTerms]:
    node = seen.node
    if node is None:  # not listed (yet): held while the policies are unknown, else the drain finds out for itself
        return None, PolicyTerms(undecided=True, hold_recheck_in=UNKNOWN_RECHECK_SECONDS) if seen.unknown else PolicyTerms()
    name = body["metadata"]["name"]
    holds = nodes.holder_of(dict(node)) == name
    if seen.unknown and not (seen.synced and holds):
        return None, _unknown(body, holds, seen.unknown, now)
    if not seen.served:
        return None, PolicyTerms()
    verdict = seen.verdict
    # A policy selects the node, yet the decision has no word on this maintenance: not listed yet, or being
    # deleted (it left the line). Decided once it has: never drained meanwhile as if no policy applied.
    if verdict is None and seen.selected:
        return None, PolicyTerms(undecided=True, hold_recheck_in=HOOK_RECHECK_SECONDS[hooks.JobState.MISSING])
    if verdict is None or verdict.policy is None or verdict.kind == VerdictKind.UNGOVERNED:
        return None, PolicyTerms(conditions=wording.left_line(body.get("status") or {}))
    policy = verdict.policy
    if not holds and verdict.kind in (VerdictKind.WAITING, VerdictKind.CLOSED, VerdictKind.CONFLICT):
        return policy, PolicyTerms(waiting=wording.waiting_plan(body, verdict, now))
    return policy, _governed(body, holds, verdict, policy, seen, refused_jobs, now)


def _governed(body: Mapping[str, Any], holds: bool, verdict: Verdict, policy: model.Policy, seen: Seen,
              refused_jobs: Mapping[str, str], now: datetime.datetime) -> PolicyTerms:
    """The terms of a maintenance whose policy lets it take or keep its node."""
    # What the stored status and the policy's windows say now, read once before the terms are worded.
    gave_back = model.gave_back(body)
    window = policy.window(now)
    if verdict.kind == VerdictKind.ADMITTED:  # paused or not now: a decision made before a window closed would say not
        verdict = line.with_slot(policy, window)
    node_name = body["spec"]["nodeName"]
    queued = wording.queued_condition(verdict, node_name)
    governed = PolicyTerms(rules=policy.rules, conditions=(queued,))
    # A slot given back stays given back until the decision has seen it: a grant made before must not take the node.
    if not holds and gave_back and verdict.kind != VerdictKind.GIVEN_BACK:
        return PolicyTerms(undecided=True, hold_recheck_in=GIVEN_BACK_RECHECK_SECONDS)
    given_back = None if holds else wording.queued_condition(Verdict(VerdictKind.GIVEN_BACK, policy), node_name)
    if verdict.kind == VerdictKind.GIVEN_BACK:  # the checks at takeover are made again; passed, it rejoins the queue
        return dataclasses.replace(governed, given_back=given_back,
                                   rejoin=wording.waiting_plan(body, Verdict(VerdictKind.WAITING, policy), now))
    if verdict.kind == VerdictKind.CONFLICT:  # taken before the second policy appeared: evict nothing until it is resolved
        return dataclasses.replace(governed, hold=wording.message(verdict, node_name), hold_failed=True)
    # windowEnd Pause and no window open: evict nothing until the next opens, even on a node taken only now with a
    # slot granted before the window closed (it is cordoned, and holds).
    if verdict.paused:
        return dataclasses.replace(governed, hold=wording.pause(verdict, node_name), hold_recheck_in=wording.until(verdict.opens, now))
    # Under windowEnd Pause, the drain looks again when the open window closes.
    closing = wording.until(window.closes, now) if window and policy.window_end == model.WindowEnd.PAUSE else None
    if policy.pre_drain is None:
        return dataclasses.replace(governed, given_back=given_back, hold_recheck_in=closing)
    if not holds:
        return dataclasses.replace(governed, given_back=given_back, hold="the preDrain Job starts once the node is cordoned")
    refused = refused_jobs.get(hooks.job_name(hooks.PRE_DRAIN, body), "")
    hook = hooks.assess(hooks.PRE_DRAIN, policy.name, policy.pre_drain, body, seen.pre_drain_job, policy.hook_namespace(hooks.PRE_DRAIN),
                        seen.operator_namespace, refused)
    outcome = hook.outcome
    conditions = (queued, wording.hook_condition(hooks.PRE_DRAIN, outcome))
    if outcome.state == hooks.JobState.SUCCEEDED:
        return dataclasses.replace(governed, conditions=conditions, hold_recheck_in=closing)
    return dataclasses.replace(governed, conditions=conditions, jobs=(hook.create,) if hook.create else (), hold=outcome.message,
                               hold_failed=outcome.state == hooks.JobState.FAILED, hold_recheck_in=HOOK_RECHECK_SECONDS[outcome.state])


def _unknown(body: Mapping[str, Any], holds: bool, why: str, now: datetime.datetime) -> PolicyTerms:
    """The policies cannot be read (not yet, or not now): hold. A maintenance that has not taken its node waits
    without touching it; one that holds it keeps it and evicts nothing, since its rules and hooks are not known."""
    verdict = Verdict(VerdictKind.UNKNOWN, why=why)
    if not holds:
        return PolicyTerms(waiting=wording.waiting_plan(body, verdict, now))
    return PolicyTerms(hold=wording.message(verdict, body["spec"]["nodeName"]), hold_recheck_in=UNKNOWN_RECHECK_SECONDS)

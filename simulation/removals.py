"""A drain removes only the pods it may: never one the policy's drain rules keep or wait for, nor a mirror pod, nor a
DaemonSet's pod, nor a pod outside its podSelector; and it deletes a pod past its budget only once its escalation
ladder says so; under windowEnd Pause, it removes nothing while no window of its policy is open.

What a pod is (mirror, DaemonSet, finished, the rule that treats it) is read with the operator's own definitions
(``drain.pods``, ``drain.rules``), and the maintenance as the planner reads it (the policy's drain defaults filled in,
its ladder capped by maxEscalation: ``policy.terms.governed``); whether the removal was allowed is decided here, from
the state before the step and the simulated clock. The drain rules and a pod's drain annotation count only on a node a
policy governs (docs/policy.md, "Drain defaults and rules"); a DaemonSet pod may go only once its DaemonSet is gone
(kubectl drain --force), and a finished pod may always go unless a Skip keeps it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.drain import plans, pods, rules, status
from node_maintenance.policy import model, terms
from simulation import counting
from simulation.history import Action, ActionKind, History, State, known


def removal_violations(history: History) -> list[str]:
    """The pods the newest step evicted or deleted that the drain had to leave, each sentence naming the pod, its node
    and what kept it."""
    return [found for removal in history[-1].of_kind(ActionKind.EVICTION, ActionKind.POD_DELETE)
            for found in _violations(_until_sent(history, removal), removal)]


def _until_sent(history: History, removal: Action) -> History:
    """The history up to the step ``removal`` was decided in: the newest, or for a write carried out late
    (``Fault.LATE``), the step it was sent in. A removal sent while its maintenance held the node may land after the
    node was given back, as a request queued in the API server does: what it is judged by is what the operator knew
    when it sent it (seed 1343346368 of Late, a deletion the escalation ladder ordered landing after its
    NodeMaintenance was deleted)."""
    if not removal.sent:
        return history
    index = max((i for i, st in enumerate(history) if st.before.revision <= removal.sent), default=0)
    return history[:index + 1]


def _violations(history: History, removal: Action) -> list[str]:
    """Why the drain had to leave the pod ``removal`` took, judged in the newest step of ``history`` (empty: it could
    go)."""
    newest = history[-1]
    before = newest.before
    decided = removal.sent or removal.revision  # the revision the removal was sent at: what happened after came too late to count
    taken = {take.node: take.maintenance for take in newest.takes() if not (take.revision and decided) or take.revision < decided}
    # Pods bound since the step before (a user's, between steps) may not have reached the operator's watch yet: they do
    # not hold back a later order in this step.
    unseen = set(before.pods) - set(known(history).pods)
    # Pods this step took off their nodes, by when: a drain's own removal or the kubelet finishing a deletion, either
    # before a later removal of the same step (which may hold several drain steps).
    left = {key: newest.after.pod_removals.get(key, 0) for key in before.pods if key not in newest.after.pods}
    gone = unseen | {key for key, revision in left.items() if revision < decided}
    pod = before.pods.get(removal.key)
    if pod is None:
        return []
    if (later := newest.after.pods.get(removal.key)) is not None and pods.finished(later):
        pod = later  # it completed within the step, before the drain removed it: a finished pod may go
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    verb = "evicted" if removal.kind is ActionKind.EVICTION else "deleted"
    holder = removal.maintenance or before.holder(node) or taken.get(node)
    body = before.maintenances.get(holder or "")
    if body is None:
        return [f"pod {removal.key} {verb} from node {node}, which no NodeMaintenance holds"]
    ruling = counting.with_departed(history, before)  # a policy deleted moments ago still rules its drains
    governing = [p for p in counting.policies(ruling) if p.name in counting.governed_by(ruling, node)]
    if len(governing) > 1:
        rivals = ", ".join(p.name for p in governing)
        return [f"pod {removal.key} {verb} from node {node} while NodeMaintenancePolicies {rivals} all govern it (a conflict holds the drain)"]
    policy = governing[0] if governing else None
    m = terms.governed(body, policy, plans.PolicyTerms())
    as_known = _as_known(history, body, policy, node)
    kept = _kept(before, m, policy, pod, node, gone)
    if kept and as_known is not None and not _kept(before, *as_known, pod, node, gone):
        kept = []  # the rules as the operator last surely knew them let it go: a policy created or edited just before the step
    found = [f"pod {removal.key} {verb} from node {node} by NodeMaintenance {m.name}, but {why}" for why in kept]
    # Decided within the step, or at the end of the one before and carried out now (a request under way as the
    # operator was stopped, its wall clock set back in between): the window as it stood at any of those instants,
    # under the policy as it stands or as the operator last surely knew it (windowEnd Pause set just before the step:
    # seed 431003124 of Rolling).
    instants = (before.at, newest.after.at, *(st.after.at for st in history[-2:-1]))
    if policy is not None and _paused(policy, instants) and not pods.finished(pod) \
            and (as_known is None or _paused(as_known[1], instants)):
        found.append(f"pod {removal.key} {verb} from node {node} by NodeMaintenance {m.name}, but no window of "
                     f"NodeMaintenancePolicy {policy.name} was open and its windowEnd is Pause")
    if removal.kind is ActionKind.POD_DELETE and not pods.finished(pod):
        # The deletion may be the retry of one the drain decided in the step before, on that step's wall clock: when
        # the clock was set back in between, the ladder is judged at the later of the two.
        now = max([newest.after.at, *(st.after.at for st in history[-2:-1])])
        unescalated = _unescalated(now, m, pod, removal)
        if unescalated and as_known is not None and as_known[1] is not None \
                and not _unescalated(now, as_known[0], pod, removal):
            unescalated = []  # the ladder as the operator last surely knew it (a policy edited just before the step) had it due
        found += [f"pod {removal.key} deleted from node {node} past its budgets by NodeMaintenance {m.name}, but {why}"
                  for why in unescalated]
    return found


def _as_known(history: History, body: Mapping[str, Any], policy: model.Policy | None, node: str) -> tuple[plans.Maintenance, model.Policy | None] | None:
    """The maintenance and the policy governing its node as the operator last surely knew them, at the end of the step
    before (the policy None: none governed it then). None when there is no step before, no policy now, several then (a
    conflict, which holds the drain), or the operator started just before this step: its drains wait for its first
    listing, which shows the policies as the step began. A policy created or edited between two steps reaches the
    operator's watch at the instant the next step starts, when a drain's timer due then may already act (as the operator
    is stopped, say: seed 3094506084 of Windowed, a replace's new policy created as an operator that never saw the old
    one drained under none). A policy deleted moments ago still governs here (``counting.with_departed``)."""
    if len(history) < 2 or policy is None or history[-1].started:
        return None
    then = counting.policies_known(history)
    governing = [p for p in counting.policies(then) if p.name in counting.governed_by(then, node)]
    if len(governing) > 1:
        return None
    earlier = governing[0] if governing else None
    return terms.governed(body, earlier, plans.PolicyTerms()), earlier


def _paused(policy: model.Policy | None, instants: tuple[datetime.datetime, ...]) -> bool:
    """Whether ``policy`` pauses its drains at every one of ``instants``: windowEnd Pause, and no window open."""
    return policy is not None and policy.window_end == model.WindowEnd.PAUSE and not counting.window_open(policy, *instants)


def _kept(state: State, m: plans.Maintenance, policy: model.Policy | None, pod: Mapping[str, Any], node: str, gone: set[str]) -> list[str]:
    """Why the drain had to leave ``pod`` (empty: it could go); ``gone``: pods already off the node by then."""
    daemonsets = {key: key in state.daemonsets for p in state.pods.values() if (key := pods.daemonset_of(dict(p)))}
    action = pods.classify(dict(pod), m.selector, daemonsets)
    if action is pods.Action.KEEP_MIRROR:
        return ["it is a mirror pod (the kubelet's)"]
    if action in (pods.Action.KEEP_DAEMONSET, pods.Action.KEEP_UNKNOWN_DAEMONSET):
        return [f"it is a pod of DaemonSet {pods.daemonset_of(dict(pod))}"]
    if action is pods.Action.KEEP_UNSELECTED:
        return ["it is outside the maintenance's spec.drain.podSelector"]
    if policy is None:
        return []
    treatment = rules.treatment(pod, policy.rules)
    where = f"NodeMaintenancePolicy {policy.name}"
    if treatment.behavior is rules.Behavior.SKIP:
        return [f"{where} keeps it on the node (Skip)"]
    if pods.finished(pod):
        return []
    if treatment.behavior is rules.Behavior.WAIT_COMPLETED:
        return [f"{where} waits for it to complete by itself (WaitCompleted)"]
    if treatment.behavior is rules.Behavior.INVALID:
        return [f"its annotation {rules.ANNOTATION}={_annotation(pod)!r} is neither skip nor wait-completed, which protects it"]
    current = min((t.order for key, p in state.pods.items() if (p.get("spec") or {}).get("nodeName") == node and key not in gone
                   and not pods.finished(p) and pods.must_go(dict(p), m.selector, daemonsets)
                   and (t := rules.treatment(p, policy.rules)).behavior is rules.Behavior.DRAIN), default=treatment.order)
    if treatment.order > current:
        return [f"its drain order {treatment.order} under {where} comes after order {current}, whose pods are still on the node"]
    return []


def _annotation(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata", {}).get("annotations") or {}).get(rules.ANNOTATION))


def _unescalated(now: datetime.datetime, m: plans.Maintenance, pod: Mapping[str, Any], removal: Action) -> list[str]:
    """Why deleting ``pod`` past its budgets was not the escalation ladder's to do at ``now`` (empty: it was)."""
    if not pods.escalable(dict(pod)):
        return ["no escalation deletes a mirror pod or a DaemonSet's"]
    if status.drained_once(m.status):
        return ["its drain had succeeded, which ends the escalation ladder"]
    started = m.status.get("drainStartTime")
    due = [s for s in m.escalation if started and (now - timestamps.parse(started)).total_seconds() >= s.after]
    if not due:
        ladder = ", ".join(f"{s.action} after {s.after}s" for s in m.escalation) or "none"
        return [f"no step of its escalation ladder had come (ladder: {ladder}; drainStartTime {started or 'not set'})"]
    if removal.grace == 0 and due[-1].action is plans.Action.DELETE_PODS and m.grace != 0:
        return [f"with grace period 0 while its ladder's step due is DeletePods after {due[-1].after}s, not ForceDeletePods"]
    return []

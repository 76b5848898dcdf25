"""Draining the node a step holds: which pods go now, the escalation ladder, the timeout, and the status that says so.

Which pods eviction removes at a step, paced by their budgets and the drain rules, is ``drain.evicting``'s.

Escalation (spec.drain.escalation, opt-in): from a step's afterSeconds past drainStartTime on, the pods eviction has not
removed are deleted instead, bypassing their budgets (ForceDeletePods: with grace period 0, those still terminating
too), never a mirror or a DaemonSet pod, nor one the drain rules hold (a later order, WaitCompleted, an annotation that
protects it), nor an etcd guard pod; status.escalatedPods names each once; on a control-plane node while the etcd-quorum
guard allows (``escalation_guard``). onTimeout HandBack ends a drain at its timeout with the hand-back a deletion does
(``drain.handback``). Both end with the drain: once it has succeeded, pods that land on the node later are evicted,
paced by their budgets, never escalated nor timed out (``status.drained_once``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import conditions, timestamps
from node_maintenance.coordination import quorum
from node_maintenance.drain import blocking, budgets, elapsed, escalation_guard, events, evicting, handback, status, taking
from node_maintenance.drain.plans import Action, Attempt, Escalation, Maintenance, OnTimeout, Plan, Removal
from node_maintenance.drain.podindex import Facts, PodIndex
from node_maintenance.drain.taking import Taken


@dataclass(frozen=True)
class Scene:
    """What one step of a drain reads: the maintenance, its node as taken, the node's pods and budgets, the removals
    sent before; and what follows from them once, the pods that go and the drain's totals and start."""

    maintenance: Maintenance
    taken: Taken
    index: PodIndex
    coverage: budgets.Coverage
    to_go: list[Facts]
    now: datetime.datetime
    # Totals and the start describe the node when this maintenance took it; a restarted operator keeps them.
    started: datetime.datetime
    total: int
    to_evict: int
    attempts: Mapping[str, Attempt]
    in_flight: Mapping[str, budgets.InFlight]
    # The drain has succeeded before: the pods to go came later, and the timeout and the ladder no longer apply.
    drained: bool
    counted: float | None = None  # the seconds this process counted the drain has run (``elapsed.seconds``)

    @classmethod
    def of(cls, m: Maintenance, taken: Taken, index: PodIndex, coverage: budgets.Coverage, now: datetime.datetime, *,
           daemonsets: Mapping[str, bool], attempts: Mapping[str, Attempt], in_flight: Mapping[str, budgets.InFlight]) -> Scene:
        previous = m.status
        started_text = previous.get("drainStartTime") if not taken.fresh else None
        to_go = index.facts(m.selector, m.terms.rules, daemonsets, coverage)
        keep = not taken.fresh and "evictionPods" in previous
        return cls(maintenance=m, taken=taken, index=index, coverage=coverage, to_go=to_go, now=now,
                   started=timestamps.parse(started_text) if started_text else now,
                   total=previous["totalpods"] if keep else len(index), to_evict=previous["evictionPods"] if keep else len(to_go),
                   attempts=attempts, in_flight=in_flight, drained=status.drained_once(previous), counted=m.counted if started_text else None)

    @property
    def elapsed(self) -> float:
        return elapsed.seconds(self.started, self.now, self.counted)

    @property
    def pending(self) -> list[tuple[str, str]]:
        return [(f.pod["metadata"]["namespace"], f.pod["metadata"]["name"]) for f in self.to_go]


def drain(scene: Scene) -> Plan:
    """The step of a drain that holds its node: drained, timed out, held by the policy, or removing pods."""
    m = scene.maintenance
    if not scene.to_go:
        done = m.status.get("phase") != status.Phase.SUCCEEDED
        told = (_event(events.Type.NORMAL, "SucceedMaintenance", f"node {m.node_name} drained"),) if done else ()
        # The drain's duration is measured once: late pods leaving afterwards are no drain of their own.
        return _holding(scene, status.Phase.SUCCEEDED, _status(scene, status.Phase.SUCCEEDED, "", []), scene.taken.events + told,
                        drained_after=scene.elapsed if done and not scene.drained else None)
    if m.timeout and scene.elapsed > m.timeout and not scene.drained:
        return _timed_out(scene)
    if m.terms.hold:  # the policy holds the drain (its preDrain Job, a conflict, a window's end): nothing is evicted
        phase = status.Phase.FAILED if m.terms.hold_failed else status.Phase.RUNNING
        return _holding(scene, phase, _status(scene, phase, m.terms.hold, []), scene.taken.events, recheck_in=m.terms.hold_recheck_in)
    return _running(scene)


def _timed_out(scene: Scene) -> Plan:
    """Past spec.drain.timeoutSeconds: fail and keep the node, or (onTimeout HandBack) give it back and end."""
    m = scene.maintenance
    waiting = evicting.removals(m, scene.to_go, scene.coverage, scene.now, scene.attempts, scene.in_flight)
    names = ", ".join(f"{ns}/{name}" for ns, name in scene.pending)
    left = f"drain timed out after {m.timeout}s with pods left: {names} ({waiting.text() or 'still terminating'})"
    entries, deadlocks = _blocked_by(scene, (), waiting.blocked)
    told = scene.taken.events + deadlocks
    if m.on_timeout == OnTimeout.HAND_BACK:  # given back as a deletion gives it back; the maintenance ends here
        error = f"{left}; the node was given back as it was before this maintenance"
        ended = conditions.Condition(type=status.TIMED_OUT, status="True", reason=status.HANDED_BACK, message=error)
        given = handback.hand_back(m.name, m.node_name, dict(scene.taken.node), scene.taken.coordinated)
        return Plan(phase=status.Phase.FAILED, report=_status(scene, status.Phase.FAILED, error, entries, also=(ended,)),
                    events=(*told, _event(events.Type.WARNING, status.TIMED_OUT, error)), holds_node=False, handback=given)
    error = f"{left}; the node stays cordoned until this NodeMaintenance is deleted"
    failing = () if m.status.get("phase") == status.Phase.FAILED else (_event(events.Type.WARNING, "FailedMaintenance", error),)
    return _holding(scene, status.Phase.FAILED, _status(scene, status.Phase.FAILED, error, entries), told + failing)


def _running(scene: Scene) -> Plan:
    """Removing pods: those eviction takes now, and those the escalation step due deletes instead."""
    m = scene.maintenance
    step = evicting.removals(m, scene.to_go, scene.coverage, scene.now, scene.attempts, scene.in_flight)
    escalated: list[dict[str, Any]] = list(m.status.get("escalatedPods") or [])
    told = list(scene.taken.events)
    ladder = () if scene.drained else m.escalation
    stage = next((s for s in reversed(ladder) if scene.elapsed >= s.after), None)
    guarded = escalation_guard.asked(m, scene.taken, stage, scene.index.pods, scene.coverage) if stage is not None else None
    if guarded is not None and guarded.status != "True":  # nothing deleted by escalation; looked at again, as at takeover
        step.wake_in(taking.QUORUM_RECHECK_SECONDS)
        told.extend(escalation_guard.told(guarded, m.status))
    elif stage is not None:
        for removal in deletions(m, stage, scene.to_go, step, scene.attempts, scene.now.timestamp(), escalated):
            step.removals.append(removal)
            if not _recorded(escalated, removal.namespace, removal.name, stage.action):
                escalated.append(_escalated(removal, scene.now))
                told.extend(_escalation_events(removal, stage))
    upcoming = next((s for s in ladder if scene.elapsed < s.after), None)
    if upcoming is not None:  # nothing is deleted before its time, and the drain wakes then
        step.wake_in(upcoming.after - scene.elapsed)
    if m.terms.hold_recheck_in is not None:
        step.wake_in(m.terms.hold_recheck_in)
    if m.timeout and not scene.drained:
        step.wake_in(m.timeout - scene.elapsed + 1)
    entries, deadlocks = _blocked_by(scene, step.removals, step.blocked)
    report = _status(scene, status.Phase.RUNNING, step.text(), entries, escalated, also=(guarded,) if guarded else ())
    return _holding(scene, status.Phase.RUNNING, report, (*told, *deadlocks), sent=tuple(step.removals), recheck_in=step.recheck_in)


def _holding(scene: Scene, phase: status.Phase, report: status.Report, told: tuple[events.Event, ...], *, sent: tuple[Removal, ...] = (),
             recheck_in: float | None = None, drained_after: float | None = None) -> Plan:
    """A step that keeps the node: with what taking it takes (the patch, the Lease) and the policy's Jobs."""
    taken = scene.taken
    return Plan(phase=phase, report=report, node_patch=taken.node_patch, removals=sent, events=told, recheck_in=recheck_in,
                holds_node=True, drained_after=drained_after, lease_claim=taken.lease_claim, lease_seen=taken.lease_seen,
                jobs=scene.maintenance.terms.jobs)


def _status(scene: Scene, phase: status.Phase, error: str, entries: list[dict[str, Any]], escalated: Sequence[dict[str, Any]] | None = None, *,
            also: tuple[conditions.Condition, ...] = ()) -> status.Report:
    """What the step's status says: ``entries`` the budgets blocking it, ``escalated`` the pods escalation deleted (None:
    as before), ``also`` conditions besides the policy's and the Lease's."""
    m = scene.maintenance
    lease = (scene.taken.lease_condition,) if scene.taken.lease_condition is not None else ()
    # Every drain records what it evicts, under a policy or none: its node may be relabelled into a pool that waits for
    # health, or waitForHealthy switched on, while it runs or just as it ends (seed 1908727256 of Rolling).
    evicting = tuple((f.budgets, f.pod) for f in scene.to_go if not f.finished)
    return status.Report(phase=phase, last_error=error, total=scene.total, eviction_pods=scene.to_evict, pending=tuple(scene.pending),
                         drain_started=timestamps.rfc3339(scene.started), blocking_budgets=entries, late=scene.drained,
                         conditions=m.terms.conditions + lease + also, escalated=escalated, evicting=evicting)


def _blocked_by(scene: Scene, sent: Sequence[Removal], held: Mapping[str, str]) -> tuple[list[dict[str, Any]], tuple[events.Event, ...]]:
    """The budgets holding the drain back (``held``: pod ref -> the budget it waits on), and the events of the structural
    blocks seen for the first time."""
    going = {r.uid for r in sent} | {uid for uid, a in scene.attempts.items() if a.accepted}
    moving = {r.budget for r in sent if r.budget} | set(scene.in_flight)
    # The pods still to go that ask a budget, less those on their way out and ``going``; one under two budgets is never
    # evicted, so it always waits. What holds them back is the budgets' analysis, told as the status's entries.
    waiting = [f for f in scene.to_go if not (f.leaving or f.finished) and (len(f.budgets) > 1 or (len(f.budgets) == 1 and f.uid not in going))]
    analysis = budgets.assess(waiting, scene.coverage, scene.index.selected)
    entries = blocking.blocking(analysis, held, scene.coverage, moving)
    fresh = blocking.new_deadlocks(scene.maintenance.status.get("blockingBudgets") or [], entries)
    return entries, tuple(_event(events.Type.WARNING, blocking.Reason.DEADLOCK, entry["message"]) for entry in fresh)


def _event(kind: events.Type, reason: str, message: str) -> events.Event:
    """An event on the NodeMaintenance."""
    return events.Event(on_node=False, type=kind, reason=reason, message=message)


def deletions(m: Maintenance, stage: Escalation, to_go: list[Facts], step: evicting.Step, attempts: Mapping[str, Attempt],
              clock: float, escalated: list[dict[str, Any]]) -> list[Removal]:
    """The pods ``stage`` deletes now: those the drain waits for that eviction has not removed and no eviction goes for in this step
    (for ForceDeletePods, those still terminating too), never a mirror or a DaemonSet pod, nor one the drain rules hold (``step.held``:
    the ladder bypasses budgets, never the rules), nor an etcd guard pod (``quorum.guards``: its budget alone paces it). A pod
    already deleted by this stage is not deleted again, unless that deletion failed (then at its retry time)."""
    going = {r.uid for r in step.removals}
    chosen = []
    for pod in to_go:
        if pod.uid in going or pod.uid in step.held or pod.finished or not pod.escalable or quorum.guards(pod.budgets):
            continue
        attempt = attempts.get(pod.uid)
        meta = pod.pod["metadata"]
        if _recorded(escalated, meta["namespace"], meta["name"], stage.action) and not (attempt and attempt.error and attempt.not_before <= clock):
            continue
        if stage.action == Action.DELETE_PODS and (pod.leaving or (attempt and attempt.accepted and attempt.not_before > clock)):
            continue  # on its way out already: ForceDeletePods is for those stuck terminating
        grace = m.grace if stage.grace is None else stage.grace
        chosen.append(Removal(namespace=meta["namespace"], name=meta["name"], uid=pod.uid, delete=True, grace=grace, budget=None,
                              escalation=stage.action, bypassed=(held_by,) if (held_by := step.blocked.get(pod.ref)) else pod.budgets))
    return chosen


def _recorded(escalated: Sequence[dict[str, Any]], namespace: str, name: str, action: str) -> bool:
    """Whether status.escalatedPods names this pod as deleted by ``action``."""
    return any((e["namespace"], e["name"], e["action"]) == (namespace, name, action) for e in escalated)


def _escalated(removal: Removal, now: datetime.datetime) -> dict[str, Any]:
    """The status.escalatedPods entry of an escalated deletion."""
    entry = {"namespace": removal.namespace, "name": removal.name, "action": removal.escalation}
    return {**entry, **({"budget": ", ".join(removal.bypassed)} if removal.bypassed else {}), "time": timestamps.rfc3339(now)}


def _escalation_events(removal: Removal, stage: Escalation) -> tuple[events.Event, events.Event]:
    """The escalated deletion told on the NodeMaintenance and on the pod, with the budget it bypasses."""
    message = (f"pod {removal.namespace}/{removal.name} deleted by escalation {stage.action} {stage.after}s after the drain started"
               + (" with grace period 0" if stage.grace == 0 else "")
               + (f", bypassing PodDisruptionBudget {', '.join(removal.bypassed)}" if removal.bypassed else ""))
    return (_event(events.Type.WARNING, stage.action, message),
            events.Event(on_node=False, type=events.Type.WARNING, reason=stage.action, message=message,
                         pod=(removal.namespace, removal.name, removal.uid)))

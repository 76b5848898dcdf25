"""What a maintenance does next, decided from what the cluster shows: one pure function, :func:`plan`.

Inputs are plain objects as the API (or a watch) delivers them, plus what earlier removals met
(``attempts``) and the evictions sent that budgets have not counted yet (``in_flight``); the output
is a :class:`Plan` that ``executor`` carries out. Nothing here does I/O or keeps state, so every
situation a drain meets is a table row in the unit tests.

Pacing: a pod under a PodDisruptionBudget is evicted only while the budget allows another disruption
(less the evictions already sent to it), and a pod the budget refused waits until the budget changes;
one held back only by evictions in flight is looked at again when they stop counting, should the
budget's change never be seen (an answer lost on the way).
Pods without a budget go at once; refused or failed ones are tried again at their attempt's time.

Escalation (spec.drain.escalation, opt-in): from a step's afterSeconds past drainStartTime on, the pods eviction has not
removed are deleted instead, bypassing their budgets (ForceDeletePods: with grace period 0, those still terminating
too), never a mirror or a DaemonSet pod; status.escalatedPods names each once. onTimeout HandBack ends a drain at its
timeout with the hand-back a deletion does (``drain.handback``), and a maintenance so ended plans nothing ever again.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from node_maintenance.api import conditions as cond
from node_maintenance.api import timestamps
from node_maintenance.coordination import quorum as qu
from node_maintenance.coordination import remediation as rem
from node_maintenance.drain import blocking as drainblock
from node_maintenance.drain import budgets as pdbs
from node_maintenance.drain import evicted
from node_maintenance.drain import handback as handbacks
from node_maintenance.drain import node as nodes
from node_maintenance.drain import pods as podrules
from node_maintenance.drain import rules as drainrules
from node_maintenance.drain import status as st
from node_maintenance.drain.events import Event
from node_maintenance.drain.podindex import Facts, PodIndex

# A maintenance the etcd-quorum guard holds back looks again this often (control-plane nodes change rarely).
QUORUM_RECHECK_SECONDS = 10.0
# A maintenance failed because another one holds its node looks again this often (the other may be
# gone without giving the node back); every other wait ends on a change the watches report.
NODE_HELD_RECHECK_SECONDS = 15.0
# spec.drain.escalation's actions and spec.drain.onTimeout's values.
DELETE_PODS, FORCE_DELETE_PODS = "DeletePods", "ForceDeletePods"
FAIL, HAND_BACK = "Fail", "HandBack"


@dataclass(frozen=True)
class Escalation:
    """One step of spec.drain.escalation: from ``after`` seconds past drainStartTime, the pods eviction has not
    removed are deleted (``action``)."""

    after: int
    action: str

    @property
    def grace(self) -> int | None:
        """ForceDeletePods deletes at once; DeletePods as the maintenance's grace says (None: the pod's own)."""
        return 0 if self.action == FORCE_DELETE_PODS else None


@dataclass(frozen=True)
class Maintenance:
    """A NodeMaintenance as the planner reads it (its v1beta1 view)."""

    name: str
    node_name: str
    reason: str = ""
    generation: int = 1
    selector: dict[str, Any] | None = None
    grace: int | None = None
    timeout: int = 0  # seconds from drainStartTime; 0 waits forever
    on_timeout: str = FAIL  # what the timeout does: fail and keep the node, or hand it back
    escalation: tuple[Escalation, ...] = ()  # ascending afterSeconds
    status: Mapping[str, Any] = field(default_factory=dict)
    # From a NodeMaintenancePolicy: its drain rules (None: no policy, and pod annotations count for nothing),
    # and why no pod may be evicted yet (its preDrain Job), failed or still to come.
    rules: tuple[drainrules.Rule, ...] | None = None
    hold: str = ""
    hold_failed: bool = False
    hold_recheck_in: float | None = None  # when to look again: at the hold (a hook Job's progress), or a window's end
    # The policy's conditions for this maintenance (Queued, PreDrain), and the hook Jobs it asks to create.
    conditions: tuple[cond.Condition, ...] = ()
    jobs: tuple[Mapping[str, Any], ...] = ()
    # Under a policy: the condition a check at takeover records when it refuses the node (the slot goes back), and,
    # for a maintenance that gave its slot back, the plan to carry out instead of taking the node once it may.
    given_back: cond.Condition | None = None
    rejoin: Plan | None = None
    # Under a policy's waitForHealthy: the status records the workloads of the pods the drain makes leave the node.
    records_evicted: bool = False

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Maintenance:
        spec = body.get("spec") or {}
        drain = spec.get("drain") or {}
        return cls(
            name=body["metadata"]["name"],
            node_name=spec["nodeName"],
            reason=spec.get("reason", ""),
            generation=body["metadata"].get("generation", 1),
            selector=drain.get("podSelector"),
            grace=drain.get("gracePeriodSeconds"),
            timeout=drain.get("timeoutSeconds") or 0,
            on_timeout=drain.get("onTimeout") or FAIL,
            escalation=tuple(Escalation(int(s["afterSeconds"]), s["action"]) for s in drain.get("escalation") or ()),
            status=body.get("status") or {},
        )


@dataclass(frozen=True)
class Attempt:
    """What the last try to remove one pod met (keyed by pod uid)."""

    not_before: float  # epoch seconds before which the pod is not tried again
    accepted: bool = False  # the API took it; wait for the pod to terminate
    refused_by: tuple[tuple[str, str], ...] = ()  # (budget, its resourceVersion) that refused it
    error: str = ""
    failures: int = 0


@dataclass(frozen=True)
class Removal:
    namespace: str
    name: str
    uid: str
    delete: bool  # finished pods are deleted; the others evicted
    grace: int | None
    budget: str | None  # the budget this eviction counts against
    budget_version: str = ""
    escalation: str = ""  # the escalation step deleting it instead of an eviction (empty: none)
    bypassed: str | None = None  # the budget that deletion bypasses


@dataclass(frozen=True)
class Plan:
    """Everything one step does, in the order the executor does it: the Lease, the node, the Jobs, the
    removals, the events, the status. Nothing is added to it or changed after :func:`plan` returns."""

    phase: str
    status: dict[str, Any]  # the whole new status
    node_patch: dict[str, Any] | None = None
    removals: tuple[Removal, ...] = ()
    events: tuple[Event, ...] = ()
    recheck_in: float | None = None  # seconds; None: only when something changes
    holds_node: bool = False
    drained_after: float | None = None  # seconds from drain start, when this plan completes the drain
    lease_claim: rem.LeaseClaim | None = None  # take or renew the node's remediation Lease (before the node)
    lease_seen: rem.LeaseState | None = None  # what this plan concluded of the Lease it was shown (another holder)
    jobs: tuple[Mapping[str, Any], ...] = ()  # hook Jobs to create
    handback: handbacks.Handback | None = None  # give the node back (onTimeout HandBack), as a deleted maintenance does


def plan(
    maintenance: Maintenance,
    node: Mapping[str, Any] | None,
    node_pods: list[dict[str, Any]] | PodIndex,
    budgets: list[dict[str, Any]],
    now: datetime.datetime,
    *,
    holder_exists: bool = True,
    daemonsets: Mapping[str, bool] | None = None,
    attempts: Mapping[str, Attempt] | None = None,
    in_flight: Mapping[str, pdbs.InFlight] | None = None,
    lease: rem.LeaseView | None = None,
    members: qu.Members | None = None,
    coverage: pdbs.Coverage | None = None,
) -> Plan:
    """Decide the next step of ``maintenance``.

    ``node_pods`` are the pods bound to the node (a :class:`~node_maintenance.drain.podindex.PodIndex` of them, when
    the caller plans step after step and keeps one), ``budgets`` the PodDisruptionBudgets of their
    namespaces; ``holder_exists`` says whether the NodeMaintenance the node names as its holder
    exists (only read when that is another one); ``daemonsets`` whether the DaemonSets its DaemonSet pods
    name exist (``pods.classify``: one not in it is unknown, and its pods stay); ``lease`` is what is known
    of the node's remediation Lease (None: no coordination with remediation); ``members`` what the
    etcd-quorum guard reads, given when a control-plane node is about to be taken (checked then, however
    long the maintenance waited); ``coverage`` which of ``budgets`` select each pod (``budgets.Coverage``: a caller
    planning step after step keeps it, so the matching is not done again).
    """
    m = maintenance
    if st.timed_out(m.status):  # handed back at its timeout: it has ended, and never takes the node again
        return Plan(str(m.status.get("phase") or ""), dict(m.status))
    coverage = coverage.over(budgets) if coverage is not None else pdbs.Coverage(budgets)
    index = node_pods if isinstance(node_pods, PodIndex) else PodIndex.of(node_pods)
    if node is None:
        return _failed(m, now, f"node {m.node_name!r} not found; the maintenance starts when a node of that name exists", None)
    holder = nodes.holder_of(dict(node))
    if holder and holder != m.name and holder_exists:
        return _failed(m, now, f"node {m.node_name!r} is already in maintenance by NodeMaintenance {holder}; "
                       f"delete this NodeMaintenance, or delete {holder} to take over", NODE_HELD_RECHECK_SECONDS)
    fresh = holder != m.name
    if fresh and members is not None:
        taken = {n["metadata"]["name"] for n in members.control_plane if nodes.holder_of(dict(n)) not in (None, m.name)}
        refused = qu.refusal(dict(node), members.control_plane, taken, list(members.etcd_guards))
        if refused:
            return _held_back(m, now, qu.held_back(refused), QUORUM_RECHECK_SECONDS)
    # The Lease is held before the node is taken, and kept while it is: claimed when due, unless another holder owns it.
    seen = rem.seen(lease, now) if lease is not None else None
    claim = rem.claim(lease, dict(node), now) if lease is not None and seen is None else None
    # A fresh read replaces what was known: a Lease another holder let go no longer holds the node back.
    # A fresh read replaces what was known of another holder; a claim of ours that stands stays known as held.
    state = (seen or (lease.known if lease.known is not None and lease.known.held else None)) if lease is not None and lease.due \
        else lease.known if lease is not None else None
    if fresh and state is not None and state.other:  # just read, or known from an earlier read: either holds the node back
        return _failed(m, now, rem.held_message(state.namespace, m.node_name, state.other), state.recheck_in, state)
    if fresh and m.rejoin is not None:  # the checks pass now: back in the policy's queue, not yet taken
        return m.rejoin
    if fresh and claim is not None and lease is not None and (lease.known is None or lease.known.other):
        # Never claimed yet: claim first, and take the node on the next step, knowing what the claim met.
        return Plan(str(m.status.get("phase") or ""), dict(m.status), lease_claim=claim, recheck_in=0.0)
    events: list[Event] = []
    patch = None
    if (fresh or not node.get("spec", {}).get("unschedulable") or not nodes.has_taint(dict(node))
            or (lease is not None and not rem.is_excluded(dict(node)))):
        patch = nodes.begin_patch(dict(node), m.name)
        if lease is not None:
            patch = rem.exclude(dict(node), patch)
    if fresh:
        message = f"node {m.node_name} cordoned and tainted for maintenance: {m.reason}"
        events += [Event(False, "Normal", "BeginMaintenance", message),
                   Event(True, "Normal", "BeginMaintenance", f"{message} (NodeMaintenance {m.name})")]
    previous = m.status
    # Totals and the start describe the node when this maintenance took it; a restarted operator keeps them.
    started_text = previous.get("drainStartTime") if not fresh else None
    started = timestamps.parse(started_text) if started_text else now
    to_go = index.facts(m.selector, m.rules, daemonsets or {}, coverage)
    keep = not fresh and "evictionPods" in previous
    total = previous["totalpods"] if keep else len(index)
    to_evict = previous["evictionPods"] if keep else len(to_go)
    pending = [(f.pod["metadata"]["namespace"], f.pod["metadata"]["name"]) for f in to_go]
    elapsed = (now - started).total_seconds()
    escalated: list[dict[str, Any]] = list(previous.get("escalatedPods") or [])

    conditions = m.conditions + ((rem.condition(state),) if state is not None else ())

    def status(phase: str, error: str, blocking: list[dict[str, Any]]) -> dict[str, Any]:
        built = st.build({**previous, "escalatedPods": escalated}, phase=phase, total=total, eviction_pods=to_evict, pending=pending, last_error=error,
                         generation=m.generation, now=timestamps.rfc3339(now), drain_started=timestamps.rfc3339(started), blocking=blocking)
        built["conditions"] = cond.with_conditions(built["conditions"], conditions, generation=m.generation, now=timestamps.rfc3339(now))
        if m.records_evicted:
            going = (w for f in to_go if not f.finished for w in evicted.workloads_of(f.budgets, f.pod))
            built["evictedWorkloads"] = evicted.recorded(previous.get("evictedWorkloads") or (), going)
        return built

    def taking(decided: Plan) -> Plan:
        """The plan with the Lease's claim, what was seen of it, and the policy's Jobs."""
        return replace(decided, lease_claim=claim, lease_seen=seen, jobs=m.jobs)

    def blocked_by(step: _Step) -> list[dict[str, Any]]:
        """The budgets holding the drain back; a structural block seen for the first time gets an event."""
        going = {r.uid for r in step.removals} | {uid for uid, a in (attempts or {}).items() if a.accepted}
        moving = {r.budget for r in step.removals if r.budget} | set(in_flight or {})
        entries = drainblock.blocking(drainblock.waiting_pods(to_go, going), step.blocked, coverage, index, moving)
        for entry in drainblock.new_deadlocks(previous.get("blockingBudgets") or [], entries):
            events.append(Event(False, "Warning", drainblock.DEADLOCK, entry["message"]))
        return entries

    if not to_go:
        done = previous.get("phase") != st.SUCCEEDED
        if done:
            events.append(Event(False, "Normal", "SucceedMaintenance", f"node {m.node_name} drained"))
        return taking(Plan(st.SUCCEEDED, status(st.SUCCEEDED, "", []), patch, (), tuple(events), None, True, elapsed if done else None))
    if m.timeout and elapsed > m.timeout:
        waiting = _removals(m, to_go, coverage, now, attempts or {}, in_flight or {})
        names = ", ".join(f"{ns}/{name}" for ns, name in pending)
        left = f"drain timed out after {m.timeout}s with pods left: {names} ({waiting.text() or 'still terminating'})"
        blocking = blocked_by(_Step(blocked=waiting.blocked))
        if m.on_timeout == HAND_BACK:  # given back as a deletion gives it back; the maintenance ends here
            error = f"{left}; the node was given back as it was before this maintenance"
            conditions += (cond.Condition(st.TIMED_OUT, "True", st.HANDED_BACK, error),)
            events.append(Event(False, "Warning", st.TIMED_OUT, error))
            given = handbacks.hand_back(m.name, m.node_name, dict(node), lease is not None)
            return Plan(st.FAILED, status(st.FAILED, error, blocking), None, (), tuple(events), None, False, handback=given)
        error = f"{left}; the node stays cordoned until this NodeMaintenance is deleted"
        if previous.get("phase") != st.FAILED:
            events.append(Event(False, "Warning", "FailedMaintenance", error))
        return taking(Plan(st.FAILED, status(st.FAILED, error, blocking), patch, (), tuple(events), None, True))
    if m.hold:  # nothing is evicted before the policy's preDrain Job has succeeded
        phase = st.FAILED if m.hold_failed else st.RUNNING
        return taking(Plan(phase, status(phase, m.hold, []), patch, (), tuple(events), m.hold_recheck_in, True))
    step = _removals(m, to_go, coverage, now, attempts or {}, in_flight or {})
    stage = next((s for s in reversed(m.escalation) if elapsed >= s.after), None)
    if stage is not None:
        for removal in _escalations(m, stage, to_go, step, attempts or {}, now.timestamp(), escalated):
            step.removals.append(removal)
            if not _recorded(escalated, removal.namespace, removal.name, stage.action):
                escalated.append(_escalated(removal, now))
                events.extend(_escalation_events(removal, stage))
    upcoming = next((s for s in m.escalation if elapsed < s.after), None)
    if upcoming is not None:  # nothing is deleted before its time, and the drain wakes then
        step.wake_in(upcoming.after - elapsed)
    recheck = step.recheck_in
    if m.hold_recheck_in is not None:
        recheck = m.hold_recheck_in if recheck is None else min(recheck, m.hold_recheck_in)
    if m.timeout:
        until_timeout = m.timeout - elapsed + 1
        recheck = until_timeout if recheck is None else min(recheck, until_timeout)
    blocking = blocked_by(step)
    return taking(Plan(st.RUNNING, status(st.RUNNING, step.text(), blocking), patch, tuple(step.removals), tuple(events), recheck, True))


def escalations(m: Maintenance, node_pods: list[dict[str, Any]], budgets: list[dict[str, Any]], started: datetime.datetime, *,
                daemonsets: Mapping[str, bool] | None = None) -> list[tuple[Escalation, datetime.datetime, tuple[Removal, ...]]]:
    """What each escalation step of ``m`` deletes, and when (``started``: the drain's start), were the pods and the
    budgets to stay as they are now: the plan's own choice at each step's time (``kubectl nm plan --escalation``)."""
    coverage = pdbs.Coverage(budgets)
    to_go = PodIndex.of(node_pods).facts(m.selector, m.rules, daemonsets or {}, coverage)
    ladder = []
    for stage in m.escalation:
        at = started + datetime.timedelta(seconds=stage.after)
        step = _removals(m, to_go, coverage, at, {}, {})
        ladder.append((stage, at, tuple(_escalations(m, stage, to_go, step, {}, at.timestamp(), []))))
    return ladder


@dataclass
class _Step:
    removals: list[Removal] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # pod ref -> budget holding it
    errors: dict[str, str] = field(default_factory=dict)  # pod ref -> last error
    recheck_in: float | None = None

    def wake_in(self, seconds: float) -> None:
        self.recheck_in = seconds if self.recheck_in is None else min(self.recheck_in, seconds)

    def text(self) -> str:
        parts = [f"{pod} waits on PodDisruptionBudget {budget}" for pod, budget in sorted(self.blocked.items())]
        parts += [f"{pod}: {error}" for pod, error in sorted(self.errors.items())]
        return "; ".join(parts)


def _allowed(budget: dict[str, Any]) -> int:
    """Disruptions the budget allows now; none until the disruption controller has processed it."""
    status = budget.get("status") or {}
    if status.get("observedGeneration", -1) < budget["metadata"].get("generation", 0):
        return 0
    return int(status.get("disruptionsAllowed") or 0)


def _removals(m: Maintenance, to_go: list[Facts], coverage: pdbs.Coverage, now: datetime.datetime,
              attempts: Mapping[str, Attempt], in_flight: Mapping[str, pdbs.InFlight]) -> _Step:
    step = _Step()
    held = drainrules.held((f.pod, f.treatment) for f in to_go if f.treatment is not None) if m.rules is not None else {}
    clock = now.timestamp()
    left: dict[str, int] = {}
    for pod in to_go:
        attempt = attempts.get(pod.uid)
        if pod.leaving:
            continue  # on its way out
        if pod.uid in held:  # a later order, or a pod left to complete by itself
            if held[pod.uid]:
                step.errors[pod.ref] = held[pod.uid]
            continue
        if attempt and attempt.accepted and attempt.not_before > clock:
            step.wake_in(attempt.not_before - clock)  # accepted: the watch shows it terminating soon
            continue
        covering = () if pod.finished else pod.budgets
        if len(covering) == 1 and not pdbs.passes(pod.asks, budget := coverage.budgets[covering[0]]):
            name, version = covering[0], budget["metadata"].get("resourceVersion", "")
            flight = in_flight.get(name)
            if name not in left:
                left[name] = _allowed(budget) - (flight.count if flight else 0)
            refused_here = attempt is not None and (name, version) in attempt.refused_by
            if left[name] > 0 and not refused_here:
                left[name] -= 1
                step.removals.append(_removal(m, pod, name, version))
            else:
                step.blocked[pod.ref] = name  # tried again when the budget changes
                if flight:
                    step.wake_in(flight.expires_in)
            continue
        if attempt and attempt.not_before > clock:
            step.wake_in(attempt.not_before - clock)
            if attempt.error:
                step.errors[pod.ref] = attempt.error
            continue
        step.removals.append(_removal(m, pod, None))
    return step


def _escalations(m: Maintenance, stage: Escalation, to_go: list[Facts], step: _Step, attempts: Mapping[str, Attempt],
                 clock: float, escalated: list[dict[str, Any]]) -> list[Removal]:
    """The pods ``stage`` deletes now: those the drain waits for that eviction has not removed and no eviction goes for in
    this step (for ForceDeletePods, those still terminating too), never a mirror or a DaemonSet pod. A pod already
    deleted by this stage is not deleted again, unless that deletion failed (then at its retry time)."""
    going = {r.uid for r in step.removals}
    chosen = []
    for pod in to_go:
        if pod.uid in going or pod.finished or not podrules.escalable(pod.pod):
            continue
        attempt = attempts.get(pod.uid)
        meta = pod.pod["metadata"]
        if _recorded(escalated, meta["namespace"], meta["name"], stage.action) and not (attempt and attempt.error and attempt.not_before <= clock):
            continue
        if stage.action == DELETE_PODS and (pod.leaving or (attempt and attempt.accepted and attempt.not_before > clock)):
            continue  # on its way out already: ForceDeletePods is for those stuck terminating
        grace = m.grace if stage.grace is None else stage.grace
        chosen.append(Removal(meta["namespace"], meta["name"], pod.uid, True, grace, None,
                              escalation=stage.action, bypassed=step.blocked.get(pod.ref) or ", ".join(pod.budgets) or None))
    return chosen


def _recorded(escalated: list[dict[str, Any]], namespace: str, name: str, action: str) -> bool:
    """Whether status.escalatedPods names this pod as deleted by ``action``."""
    return any((e["namespace"], e["name"], e["action"]) == (namespace, name, action) for e in escalated)


def _escalated(removal: Removal, now: datetime.datetime) -> dict[str, Any]:
    """The status.escalatedPods entry of an escalated deletion."""
    entry = {"namespace": removal.namespace, "name": removal.name, "action": removal.escalation}
    return {**entry, **({"budget": removal.bypassed} if removal.bypassed else {}), "time": timestamps.rfc3339(now)}


def _escalation_events(removal: Removal, stage: Escalation) -> tuple[Event, Event]:
    """The escalated deletion told on the NodeMaintenance and on the pod, with the budget it bypasses."""
    message = (f"pod {removal.namespace}/{removal.name} deleted by escalation {stage.action} {stage.after}s after the drain started"
               + (" with grace period 0" if stage.grace == 0 else "")
               + (f", bypassing PodDisruptionBudget {removal.bypassed}" if removal.bypassed else ""))
    return (Event(False, "Warning", stage.action, message),
            Event(False, "Warning", stage.action, message, pod=(removal.namespace, removal.name, removal.uid)))


def _removal(m: Maintenance, pod: Facts, budget: str | None, version: str = "") -> Removal:
    meta = pod.pod["metadata"]
    return Removal(meta["namespace"], meta["name"], pod.uid, pod.finished, m.grace, budget, version)


def _held_back(m: Maintenance, now: datetime.datetime, condition: cond.Condition, recheck: float) -> Plan:
    """Not taken, and waiting: a check made at takeover refused, ``condition`` says why; the node is untouched."""
    previous = m.status
    before: Mapping[str, Any] = next((c for c in previous.get("conditions") or [] if c.get("type") == condition.type), {})
    events = () if previous.get("phase") == st.PENDING and before.get("message") == condition.message else (
        Event(False, "Warning", condition.reason, condition.message),)
    moment = timestamps.rfc3339(now)
    status = st.build(dict(previous), phase=st.PENDING, total=0, eviction_pods=0, pending=[], last_error=condition.message,
                      generation=m.generation, now=moment, waiting=condition)
    refused = m.conditions + ((m.given_back,) if m.given_back else ())
    status["conditions"] = cond.with_conditions(status["conditions"], refused, generation=m.generation, now=moment)
    return Plan(st.PENDING, status, None, (), events, recheck, False)


def _failed(m: Maintenance, now: datetime.datetime, error: str, recheck: float | None, lease: rem.LeaseState | None = None) -> Plan:
    """Failed before taking the node: nothing drained, nothing held."""
    previous = m.status
    events = () if previous.get("phase") == st.FAILED and previous.get("lastError") == error else (
        Event(False, "Warning", "FailedMaintenance", error),)
    moment = timestamps.rfc3339(now)
    status = st.build(dict(previous), phase=st.FAILED, total=0, eviction_pods=0, pending=[], last_error=error,
                      generation=m.generation, now=moment)
    # Refused by another's Lease at takeover, a maintenance under a policy gives its slot back.
    conditions = m.conditions + ((rem.condition(lease),) + ((m.given_back,) if m.given_back else ()) if lease is not None else ())
    status["conditions"] = cond.with_conditions(status["conditions"], conditions, generation=m.generation, now=moment)
    return Plan(st.FAILED, status, None, (), events, recheck, False, lease_seen=lease)

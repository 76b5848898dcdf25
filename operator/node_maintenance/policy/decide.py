"""NodeMaintenancePolicy decisions, as pure functions: which policy governs a node, how many of its
nodes may be in maintenance and unavailable, and which NodeMaintenances get a slot or wait in line.

A NodeMaintenance holds a slot exactly while its node names it as holder (the Node records it, so an
operator restart changes nothing). Waiting ones get slots strictly in creation order: the first in
line that does not fit the pool-wide limits keeps every later one waiting too, so none overtakes another. A
topology limit holds within each value of its node label (a domain, such as a zone): one whose domain is full keeps
only the later ones of that domain waiting, and those of other domains go ahead. A node without the label is in no
domain of that key, and that key's limits do not apply to it.

Under maintenance windows, a waiting maintenance takes a slot only while one is open; windows that cannot be read
are never open. A maintenance that holds its node goes on at the window's end, unless the policy's windowEnd is
Pause: it then evicts nothing until the next window opens.

A slot once granted stands until its maintenance takes the node, is deleted, or gives the slot back: a
check made at takeover (another holder's remediation Lease, the etcd-quorum guard) refused the node,
and its status says so. Such a maintenance counts for nothing and keeps nobody waiting; it looks again
and rejoins the line, in its creation-order place, once the check passes, but never takes a slot
granted meanwhile to another, which may be taking its node at that moment.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from node_maintenance.api import conditions as cond
from node_maintenance.api import timestamps
from node_maintenance.drain import bookkeeping, events, pods, status
from node_maintenance.drain import node as nodes
from node_maintenance.drain.plans import Plan
from node_maintenance.drain.rules import Rule
from node_maintenance.policy import health, hooks
from node_maintenance.policy import windows as win

WAITING, ADMITTED, CONFLICT, UNGOVERNED = "Waiting", "Admitted", "Conflict", "Ungoverned"
UNKNOWN = "Unknown"  # the policies cannot be read now: whether one governs the node is not known
GIVEN_BACK = "GivenBack"  # a check at takeover refused the node: the slot went back, and the maintenance looks again
CLOSED = "Closed"  # in line while no maintenance window is open
CONTINUE, PAUSE = "Continue", "Pause"  # spec.windowEnd


@dataclass(frozen=True)
class TopologyLimit:
    """One entry of spec.topologyLimits."""

    key: str
    max_parallel: int | str | None = None
    max_unavailable: int | str | None = None


@dataclass(frozen=True)
class Policy:
    """A NodeMaintenancePolicy as the decisions read it."""

    name: str
    generation: int = 1
    node_selector: Mapping[str, Any] = field(default_factory=dict)
    max_parallel: int | str | None = None
    max_unavailable: int | str | None = None
    pre_drain: Mapping[str, Any] | None = None  # the Job template
    post_maintenance: Mapping[str, Any] | None = None
    drain: Mapping[str, Any] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    windows: tuple[win.Window, ...] = ()
    invalid_windows: tuple[str, ...] = ()  # why each window that cannot be read is refused: then none is ever open
    window_end: str = CONTINUE
    topology: tuple[TopologyLimit, ...] = ()
    wait_for_healthy: bool = False
    wait_for_healthy_seconds: int = health.DEFAULT_WAIT_SECONDS

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Policy:
        spec = body.get("spec") or {}
        templates = hooks.templates(spec)
        windows, invalid = win.parse(spec.get("windows") or ())
        return cls(
            name=body["metadata"]["name"],
            generation=body["metadata"].get("generation", 1),
            node_selector=spec.get("nodeSelector") or {},
            max_parallel=spec.get("maxParallel"),
            max_unavailable=spec.get("maxUnavailable"),
            pre_drain=templates.get(hooks.PRE_DRAIN),
            post_maintenance=templates.get(hooks.POST_MAINTENANCE),
            drain=spec.get("drain") or {},
            rules=tuple(Rule.of(rule) for rule in spec.get("drainRules") or ()),
            windows=windows,
            invalid_windows=invalid,
            window_end=spec.get("windowEnd") or CONTINUE,
            topology=tuple(TopologyLimit(t["topologyKey"], t.get("maxParallel"), t.get("maxUnavailable")) for t in spec.get("topologyLimits") or ()),
            wait_for_healthy=bool(spec.get("waitForHealthy")),
            wait_for_healthy_seconds=spec.get("waitForHealthySeconds") or health.DEFAULT_WAIT_SECONDS,
        )

    @property
    def windowed(self) -> bool:
        """Whether windows pace it (windows that cannot be read do: they are never open)."""
        return bool(self.windows or self.invalid_windows)

    def window(self, now: datetime.datetime) -> win.Standing | None:
        """Where its windows stand at ``now``; None without windows (always open)."""
        if not self.windowed:
            return None
        return win.standing(self.windows, now) if not self.invalid_windows else win.Standing(False)

    def selects(self, node: Mapping[str, Any]) -> bool:
        return pods.matches_selector(node.get("metadata", {}).get("labels") or {}, dict(self.node_selector))

    @property
    def hook_templates(self) -> dict[str, Mapping[str, Any]]:
        """The Job template of each hook the policy declares."""
        declared = {hooks.PRE_DRAIN: self.pre_drain, hooks.POST_MAINTENANCE: self.post_maintenance}
        return {hook: template for hook, template in declared.items() if template is not None}


def resolve(value: int | str | None, total: int) -> int | None:
    """A count, or a percentage of ``total`` nodes rounded down but at least 1 unless it is 0%; None: no limit.

    Rounding down keeps the limit on the safe side; the floor of 1 keeps a small pool from deadlocking
    (10% of 5 nodes would otherwise never let one go).
    """
    if value is None:
        return None
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    return max(1, math.floor(total * percent / 100)) if percent > 0 else 0


def slim_node(node: dict[str, Any]) -> dict[str, Any]:
    """What the decisions read of a node: its labels, its holder, whether it is schedulable and Ready.
    A heartbeat changes none of it, so it wakes no drain."""
    meta = node["metadata"]
    holder = nodes.holder_of(node)
    ready = [{"type": "Ready", "status": c.get("status")} for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return {"metadata": {"name": meta["name"], "labels": meta.get("labels") or {}, "annotations": {nodes.HOLDER: holder} if holder else {}},
            "spec": {"unschedulable": bool((node.get("spec") or {}).get("unschedulable"))}, "status": {"conditions": ready}}


def slim_maintenance(maintenance: dict[str, Any]) -> dict[str, Any]:
    """What the decisions read of a NodeMaintenance: its node, its place in line, whether it gave its slot
    back and whether its timeout ended it, not the rest of its status, which the drains write every few seconds."""
    meta = maintenance["metadata"]
    slim = {"metadata": {k: meta[k] for k in ("name", "creationTimestamp", "deletionTimestamp") if k in meta},
            "spec": {"nodeName": (maintenance.get("spec") or {}).get("nodeName")}}
    stored = maintenance.get("status") or {}
    kept = [*([{"type": QUEUED, "reason": SLOT_GIVEN_BACK}] if gave_back(maintenance) else []),
            *([{"type": status.TIMED_OUT, "status": "True"}] if status.timed_out(stored) else [])]
    return {**slim, "status": {"conditions": kept}} if kept else slim


def gave_back(maintenance: Mapping[str, Any]) -> bool:
    """Whether its status says a check at takeover refused the node and its slot went back."""
    return any(c.get("type") == QUEUED and c.get("reason") == SLOT_GIVEN_BACK for c in (maintenance.get("status") or {}).get("conditions") or [])


def unavailable(node: Mapping[str, Any]) -> bool:
    """Unschedulable or not Ready: out of service whatever the reason."""
    if (node.get("spec") or {}).get("unschedulable"):
        return True
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    return not ready or ready.get("status") != "True"


@dataclass(frozen=True)
class Verdict:
    """Where one NodeMaintenance stands with the policies."""

    kind: str  # UNGOVERNED, ADMITTED, WAITING, CLOSED, CONFLICT, GIVEN_BACK or UNKNOWN
    policy: Policy | None = None
    position: int = 0  # 1-based place in the policy's queue while WAITING or CLOSED
    queued: int = 0  # how many wait in that queue
    policies: tuple[str, ...] = ()  # every policy selecting the node, for CONFLICT
    why: str = ""  # what keeps the policies unknown, for UNKNOWN; why its windows cannot be read, for CLOSED
    full: str = ""  # the topology domain that keeps it WAITING ("" for the pool-wide limits)
    paused: bool = False  # ADMITTED and holding its node, no window open under windowEnd Pause: evicts nothing
    opens: datetime.datetime | None = None  # when the next window opens, for CLOSED and paused

    def _next(self) -> str:
        if self.why:
            return f"its windows cannot be read ({self.why}), so none opens until the policy is fixed"
        return f"the next opens at {timestamps.rfc3339(self.opens)}" if self.opens else "none opens again"

    def message(self, node_name: str) -> str:
        if self.kind == UNKNOWN:
            return (f"waiting until NodeMaintenancePolicies can be read ({self.why}); node {node_name} is not touched "
                    "until it is known which policy governs it")
        if self.kind == CONFLICT:
            return (f"node {node_name} is selected by more than one NodeMaintenancePolicy ({', '.join(self.policies)}); "
                    "change their nodeSelectors so that at most one selects it")
        if self.kind == CLOSED and self.policy:
            return (f"waiting for a maintenance window of NodeMaintenancePolicy {self.policy.name}: {self._next()}; position "
                    f"{self.position} of {self.queued} in its queue; the node is not touched until then")
        if self.kind == WAITING and self.policy and self.position:
            full = f" ({self.full})" if self.full else ""
            return (f"waiting for a slot of NodeMaintenancePolicy {self.policy.name}{full}: position {self.position} of "
                    f"{self.queued} in its queue; the node is not touched until then")
        if self.kind == WAITING and self.policy:
            return (f"the node may be taken now: back in the queue of NodeMaintenancePolicy {self.policy.name}, waiting for a slot; "
                    "the node is not touched until then")
        if self.kind == GIVEN_BACK and self.policy:
            return (f"slot of NodeMaintenancePolicy {self.policy.name} given back: the node could not be taken (see the other "
                    "conditions); it is looked at again, and the maintenance rejoins the queue once it may be taken")
        if self.kind == ADMITTED and self.policy:
            return f"slot of NodeMaintenancePolicy {self.policy.name} granted"
        return "no NodeMaintenancePolicy selects the node"

    def pause(self, node_name: str) -> str:
        """Why a paused maintenance evicts nothing."""
        name = self.policy.name if self.policy else ""
        return (f"paused until the next maintenance window of NodeMaintenancePolicy {name} (windowEnd: Pause): no window is open "
                f"and {self._next()}; no pod is evicted until then, and node {node_name} stays cordoned")


def standing(verdict: Verdict | None) -> tuple[Any, ...] | None:
    """What of a verdict its maintenance acts on: all of it but its place in line (whether it may be taken at once
    aside), which moves for every maintenance in line whenever one is admitted; and, unless admitted, the policy's
    name only (one in line reads nothing else of it: a change of its limits that leaves it in line changes nothing)."""
    if verdict is None:
        return None
    policy = verdict.policy if verdict.kind == ADMITTED or verdict.policy is None else verdict.policy.name
    return verdict.kind, policy, verdict.position == 0, verdict.policies, verdict.why, verdict.paused


@dataclass(frozen=True)
class Summary:
    """One policy's standing, for its status."""

    selected: int
    max_parallel: int | None
    max_unavailable: int | None
    in_maintenance: int
    unavailable: int
    queue: tuple[str, ...]
    conflicts: tuple[tuple[str, tuple[str, ...]], ...]  # (node, every policy selecting it)
    borrowed: tuple[str, ...] = ()  # why each hook whose template names the operator's ServiceAccount is refused
    window: win.Standing | None = None  # where its windows stand (None: it has none, always open)
    invalid_windows: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    verdicts: dict[str, Verdict]  # NodeMaintenance name -> verdict
    summaries: dict[str, Summary]  # policy name -> summary


def _order(maintenance: Mapping[str, Any]) -> tuple[str, str]:
    meta = maintenance["metadata"]
    return meta.get("creationTimestamp") or "", meta["name"]


def governing(policies: Iterable[Policy], node: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the policies that select ``node``, in name order (more than one: a conflict)."""
    return tuple(sorted(p.name for p in policies if p.selects(node)))


def decide(policies: Iterable[Policy], node_list: Iterable[Mapping[str, Any]], maintenances: Iterable[Mapping[str, Any]],
           admitted: Collection[str] = (), governed: Mapping[str, tuple[str, ...]] | None = None,
           recovering: Mapping[str, Collection[str]] | None = None, *, now: datetime.datetime) -> Decision:
    """Every NodeMaintenance's verdict and every policy's summary at ``now``, from the cluster as it is and the names
    ``admitted`` by the decision before (slots stand until taken, given back or their maintenance is deleted).
    ``governed``: ``governing`` of every node, when the caller keeps it (a node's changes rarely change it).
    ``recovering``: by policy, the nodes given back whose evicted workloads it still waits for (waitForHealthy):
    each keeps its slot in use."""
    policies = sorted(policies, key=lambda p: p.name)
    maintenances = list(maintenances)
    existing = {m["metadata"]["name"] for m in maintenances}

    def holder_of(node: Mapping[str, Any]) -> str | None:
        """The node's holder if that NodeMaintenance exists: a holder whose finalizer was removed by hand left
        its record behind, and a maintenance taking the node over is governed like any other."""
        holder = nodes.holder_of(dict(node))
        return holder if holder in existing else None

    by_node = {n["metadata"]["name"]: n for n in node_list}
    selecting = governed if governed is not None else {name: governing(policies, node) for name, node in by_node.items()}
    verdicts: dict[str, Verdict] = {}
    summaries: dict[str, Summary] = {}
    # Deleted, or ended by its timeout (the node given back): it holds no slot and waits for none.
    live = sorted((m for m in maintenances if not m["metadata"].get("deletionTimestamp") and not status.timed_out(m.get("status") or {})),
                  key=_order)
    for policy in policies:
        window = policy.window(now)
        selected = [n for name, n in by_node.items() if policy.name in selecting[name]]
        held = {n["metadata"]["name"] for n in selected if holder_of(n)}
        down = held | {n["metadata"]["name"] for n in selected if unavailable(n)}
        parallel = resolve(policy.max_parallel, len(selected))
        limit = resolve(policy.max_unavailable, len(selected))
        domains = _Domains(policy.topology, selected, held, down)
        conflicts = tuple((n, selecting[n]) for n in sorted(by_node) if policy.name in selecting[n] and len(selecting[n]) > 1)
        in_conflict = {n for n, _ in conflicts}
        waiting: list[Mapping[str, Any]] = []
        for m in live:
            node_name = str((m.get("spec") or {}).get("nodeName") or "")
            if node_name not in by_node or policy.name not in selecting[node_name]:
                continue
            holder = holder_of(by_node[node_name])
            if node_name in in_conflict:
                verdicts[m["metadata"]["name"]] = Verdict(CONFLICT, policy, policies=selecting[node_name])
            elif holder == m["metadata"]["name"]:
                verdicts[m["metadata"]["name"]] = _holds(policy, window)
            elif holder:  # another maintenance holds the node: the drain reports it and touches nothing
                verdicts[m["metadata"]["name"]] = Verdict(UNGOVERNED, policy)
            else:
                waiting.append(m)

        # What taking each node adds to the unavailable count: nothing for a node already out of service.
        adds = {m["metadata"]["name"]: 0 if m["spec"]["nodeName"] in down else 1 for m in waiting}
        standing = {m["metadata"]["name"] for m in waiting if m["metadata"]["name"] in admitted and not gave_back(m)}
        still = set((recovering or {}).get(policy.name, ())) - held  # a node taken again counts once, as held
        used, out = len(held) + len(still) + len(standing), len(down) + sum(adds[name] for name in standing)
        for recovering_node in still & by_node.keys():  # its slot is in use in its domains too
            domains.take(by_node[recovering_node], 0)
        for m in waiting:
            if m["metadata"]["name"] in standing:
                domains.take(by_node[m["spec"]["nodeName"]], adds[m["metadata"]["name"]])
        queue: list[tuple[str, str]] = []  # (name, the full domain keeping it waiting, "" for the pool)
        pool_full = window is not None and not window.open
        for m in waiting:
            name, node_obj = m["metadata"]["name"], by_node[m["spec"]["nodeName"]]
            if gave_back(m):  # counts for nothing and keeps nobody waiting
                verdicts[name] = Verdict(GIVEN_BACK, policy)
            elif name in standing:  # granted before, counted above
                verdicts[name] = Verdict(ADMITTED, policy)
            elif pool_full or not ((parallel is None or used + 1 <= parallel) and (limit is None or not adds[name] or out + adds[name] <= limit)):
                pool_full = True  # the first that does not fit the pool keeps every later one waiting
                queue.append((name, ""))
            elif full := domains.full(node_obj, adds[name]):  # keeps only the later ones of that domain waiting
                queue.append((name, full))
            else:
                used, out = used + 1, out + adds[name]
                domains.take(node_obj, adds[name])
                verdicts[name] = Verdict(ADMITTED, policy)
        closed = window is not None and not window.open
        for position, (name, full) in enumerate(queue, start=1):
            if closed and window is not None:
                verdicts[name] = Verdict(CLOSED, policy, position, len(queue), why="; ".join(policy.invalid_windows), opens=window.next_opens)
            else:
                verdicts[name] = Verdict(WAITING, policy, position, len(queue), full=full)
        summaries[policy.name] = Summary(len(selected), parallel, limit, len(held), len(down), tuple(name for name, _ in queue), conflicts,
                                         hooks.borrowed_identities(policy.hook_templates), window, policy.invalid_windows)
    return Decision(verdicts, summaries)


class _Domains:
    """The topology limits of one policy as its line is decided: per key and label value, the selected nodes, how
    many are in maintenance and unavailable, and which domains are full (the first of a domain that does not fit
    keeps the later ones of that domain waiting). Nodes without a key's label are in none of its domains."""

    def __init__(self, limits: Iterable[TopologyLimit], selected: Iterable[Mapping[str, Any]], held: Collection[str], down: Collection[str]) -> None:
        self.limits = tuple(limits)
        self.size: dict[tuple[str, str], int] = {}
        self.used: dict[tuple[str, str], int] = {}
        self.out: dict[tuple[str, str], int] = {}
        self.blocked: dict[tuple[str, str], str] = {}
        for node in selected:
            name = node["metadata"]["name"]
            for _, domain in self._of(node):
                self.size[domain] = self.size.get(domain, 0) + 1
                self.used[domain] = self.used.get(domain, 0) + (name in held)
                self.out[domain] = self.out.get(domain, 0) + (name in down)

    def _of(self, node: Mapping[str, Any]) -> list[tuple[TopologyLimit, tuple[str, str]]]:
        labels = (node.get("metadata") or {}).get("labels") or {}
        return [(limit, (limit.key, str(labels[limit.key]))) for limit in self.limits if limit.key in labels]

    def full(self, node: Mapping[str, Any], adds: int) -> str:
        """Why the node's domain cannot take it now ("" when every one can); a full domain stays full for the rest of the line."""
        for limit, domain in self._of(node):
            where = f"topology domain {domain[0]}={domain[1]}"
            if domain in self.blocked:
                return self.blocked[domain]
            parallel = resolve(limit.max_parallel, self.size[domain])
            unavailable_limit = resolve(limit.max_unavailable, self.size[domain])
            if parallel is not None and self.used[domain] + 1 > parallel:
                self.blocked[domain] = f"{where} is full: maxParallel {parallel} of its {self.size[domain]} nodes in maintenance"
            elif unavailable_limit is not None and adds and self.out[domain] + adds > unavailable_limit:
                self.blocked[domain] = f"{where} is full: maxUnavailable {unavailable_limit} of its {self.size[domain]} nodes unavailable"
            if domain in self.blocked:
                return self.blocked[domain]
        return ""

    def take(self, node: Mapping[str, Any], adds: int) -> None:
        for _, domain in self._of(node):
            self.used[domain] += 1
            self.out[domain] += adds


def _holds(policy: Policy, window: win.Standing | None) -> Verdict:
    """The verdict of a maintenance holding its node: paused while no window is open under windowEnd Pause."""
    if policy.window_end == PAUSE and window is not None and not window.open:
        return Verdict(ADMITTED, policy, paused=True, why="; ".join(policy.invalid_windows), opens=window.next_opens)
    return Verdict(ADMITTED, policy)


def holding(policies: Iterable[Policy], node: Mapping[str, Any], now: datetime.datetime) -> Verdict | None:
    """The verdict of the NodeMaintenance that holds ``node`` (its record names it), as ``decide`` gives it at ``now``
    (none when no policy selects the node). No line decides it, so it needs no look at every other maintenance: a
    draining maintenance steps at every change of its pods, and its step's cost stays apart from the pool's size."""
    selecting = sorted((p for p in policies if p.selects(node)), key=lambda p: p.name)
    if not selecting:
        return None
    if len(selecting) > 1:  # the last of them in name order, as decide's pass over the policies leaves it
        return Verdict(CONFLICT, selecting[-1], policies=tuple(p.name for p in selecting))
    return _holds(selecting[0], selecting[0].window(now))


def admission_refusal(body: Mapping[str, Any]) -> str | None:
    """Why the admission webhook refuses to store the policy ``body`` (created or updated), or None to store it: a hook
    that would run as the operator, a window that cannot be read."""
    spec = body.get("spec") or {}
    reasons = hooks.borrowed_identities(hooks.templates(spec)) + win.parse(spec.get("windows") or ())[1]
    return f"NodeMaintenancePolicy {(body.get('metadata') or {}).get('name', '')}: {'; '.join(reasons)}" if reasons else None


def with_defaults(body: Mapping[str, Any], policy: Policy) -> dict[str, Any]:
    """The NodeMaintenance with the policy's drain defaults filled in where its own spec.drain is silent."""
    spec = dict(body.get("spec") or {})
    spec["drain"] = {**policy.drain, **(spec.get("drain") or {})}
    return {**body, "spec": spec}


# ----------------------------------------------------------------- statuses
QUEUED = "Queued"
SLOT_GIVEN_BACK = "SlotGivenBack"  # the Queued reason that marks a slot given back
BORROWED_IDENTITY = "BorrowedIdentity"  # a policy's condition: a hook template names the operator's ServiceAccount
INVALID_WINDOWS = "InvalidWindows"  # a policy's condition: a window cannot be read, so none opens
WAITING_FOR_WINDOW = "WaitingForWindow"  # the Queued reason while no window is open
HOOK_CONDITIONS = {hooks.PRE_DRAIN: "PreDrain", hooks.POST_MAINTENANCE: "PostMaintenance"}
NOT_GOVERNED = cond.Condition(QUEUED, "False", "NoPolicy", "no NodeMaintenancePolicy selects the node")


def queued_condition(verdict: Verdict, node_name: str) -> cond.Condition:
    """The NodeMaintenance's Queued condition."""
    if verdict.kind == WAITING:
        return cond.Condition(QUEUED, "True", "WaitingForSlot", verdict.message(node_name))
    if verdict.kind == CLOSED:
        return cond.Condition(QUEUED, "True", WAITING_FOR_WINDOW, verdict.message(node_name))
    if verdict.kind == CONFLICT:
        return cond.Condition(QUEUED, "True", "PolicyConflict", verdict.message(node_name))
    if verdict.kind == UNKNOWN:
        return cond.Condition(QUEUED, "True", "WaitingForPolicies", verdict.message(node_name))
    if verdict.kind == GIVEN_BACK:
        return cond.Condition(QUEUED, "True", SLOT_GIVEN_BACK, verdict.message(node_name))
    return cond.Condition(QUEUED, "False", "SlotGranted", verdict.message(node_name))


def hook_condition(hook: str, outcome: hooks.Outcome) -> cond.Condition:
    """PreDrain or PostMaintenance, from how the hook's Job stands."""
    reason = {hooks.SUCCEEDED: "JobSucceeded", hooks.FAILED: "JobFailed"}.get(outcome.state, "JobRunning")
    return cond.Condition(HOOK_CONDITIONS[hook], "True" if outcome.state == hooks.SUCCEEDED else "False", reason, outcome.message)


def left_line(status: Mapping[str, Any]) -> tuple[cond.Condition, ...]:
    """A maintenance that waited for a policy no longer selecting its node says so, instead of still waiting."""
    queued: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == QUEUED), {})
    return (NOT_GOVERNED,) if queued.get("status") == "True" else ()


def waiting_plan(body: Mapping[str, Any], verdict: Verdict, now: datetime.datetime) -> Plan:
    """Phase Pending while the maintenance waits for a slot, for a conflict to end or for the policies to be
    readable: the node is untouched; looked at again in ``recheck_in`` (its place in line may have moved).

    An event marks the start of the wait and each change of its cause, not every move up the queue."""
    meta, previous = body["metadata"], body.get("status") or {}
    node_name = body["spec"]["nodeName"]
    condition = queued_condition(verdict, node_name)
    before: dict[str, Any] = next((c for c in previous.get("conditions") or [] if c.get("type") == QUEUED), {})
    told: tuple[events.Event, ...] = ()
    if previous.get("phase") != status.Phase.PENDING or before.get("reason") != condition.reason:
        told = (events.Event(on_node=False, type=events.Type.NORMAL if verdict.kind in (WAITING, CLOSED) else events.Type.WARNING,
                             reason=condition.reason, message=condition.message),)
    built = status.build(dict(previous), phase=status.Phase.PENDING, total=0, eviction_pods=0, pending=[], generation=meta.get("generation", 1),
                         last_error=condition.message if verdict.kind == CONFLICT else "", now=timestamps.rfc3339(now), waiting=condition)
    # Looked at again (and a moved place in line written) at a pace the whole line can bear, and when a window opens.
    return Plan(phase=status.Phase.PENDING, status=built, events=told,
                recheck_in=until(verdict.opens, now, bookkeeping.in_line_interval(verdict.queued)))


def until(moment: datetime.datetime | None, now: datetime.datetime, sooner_than: float | None = None) -> float | None:
    """Seconds from ``now`` until just past ``moment`` (a window's boundary), or ``sooner_than`` if that comes first."""
    if moment is None:
        return sooner_than
    seconds = max(0.0, (moment - now).total_seconds()) + WINDOW_MARGIN_SECONDS
    return seconds if sooner_than is None else min(seconds, sooner_than)


# A look at a window's boundary is made this long after it, so that clocks read there see it passed.
WINDOW_MARGIN_SECONDS = 0.1


def policy_status(previous: Mapping[str, Any], summary: Summary, generation: int, now: str) -> dict[str, Any]:
    """The policy's status; None values remove a field (a limit that became unlimited)."""
    if summary.conflicts:
        listing = "; ".join(f"node {node} is selected by {', '.join(names)}" for node, names in summary.conflicts)
        condition = cond.Condition("Conflict", "True", "NodeSelectedTwice",
                                   f"{listing}; their maintenances wait until only one NodeMaintenancePolicy selects each node")
    else:
        condition = cond.Condition("Conflict", "False", "NoConflict", "no selected node is selected by another NodeMaintenancePolicy")
    if summary.borrowed:
        identity = cond.Condition(BORROWED_IDENTITY, "True", "OperatorServiceAccount",
                                  f"{'; '.join(summary.borrowed)}; until then that hook fails without running its Job and the maintenances needing it hold")
    else:
        identity = cond.Condition(BORROWED_IDENTITY, "False", "OwnServiceAccounts", "no hook Job template names the operator's ServiceAccount")
    if summary.invalid_windows:
        windows = cond.Condition(INVALID_WINDOWS, "True", "UnreadableWindow",
                                 f"{'; '.join(summary.invalid_windows)}; until then no window opens and no queued maintenance takes a node")
    else:
        windows = cond.Condition(INVALID_WINDOWS, "False", "WindowsRead", "every maintenance window can be read")
    window = summary.window
    return {
        "observedGeneration": generation,
        "selectedNodes": summary.selected,
        "maxParallel": summary.max_parallel,
        "maxUnavailable": summary.max_unavailable,
        "inMaintenance": summary.in_maintenance,
        "unavailable": summary.unavailable,
        "queued": len(summary.queue),
        "queue": list(summary.queue),
        "conflicts": [{"node": node, "policies": list(names)} for node, names in summary.conflicts],
        "windowOpen": window is None or window.open,
        "nextWindow": timestamps.rfc3339(window.next_opens) if window and window.next_opens else None,
        "windowCloses": timestamps.rfc3339(window.closes) if window and window.closes else None,
        "conditions": cond.with_conditions(list(previous.get("conditions") or []), (condition, identity, windows), generation=generation, now=now),
    }


def same_status(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return {k: v for k, v in stored.items() if v is not None} == {k: v for k, v in new.items() if v is not None}

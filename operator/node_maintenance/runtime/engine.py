"""The drain engine of one NodeMaintenance: read → plan → execute → remember, each time something changes.

While a policy keeps it in line it watches nothing of its own: the policies' watch of the nodes tells
whether it may take its node, and their changes wake it. From its slot on, one watch of the node and one
of the pods bound to it (both scoped by field selector), plus the budget watch all drains share, and one
read of each DaemonSet the pods name. Once the node is drained both watches end: the watch of cordoned
nodes that all drained maintenances share (``cordoned``) tells of a change of the node, after which its pods
are listed again, as they are every LATE_PODS_SECONDS, for pods bound to it later (a step for any other
reason lists nothing); a node that is no longer cordoned is watched by the drain again. The
engine plans again whenever a watch reports a change, when the NodeMaintenance changes, or when the plan
asked to look again at a given time.

Everything a step does is in its :class:`~node_maintenance.drain.plans.Plan`; the executor carries
it out, and the engine remembers what came back (``drain.bookkeeping`` decides how).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from node_maintenance import api
from node_maintenance.api import HUB, timestamps
from node_maintenance.api.conversion import convert
from node_maintenance.api.paths import PODS, node_path
from node_maintenance.client.errors import KubeError
from node_maintenance.client.http import AsyncKube
from node_maintenance.client.watch import Mirror
from node_maintenance.coordination import quorum
from node_maintenance.drain import bookkeeping, pods, status
from node_maintenance.drain import node as nodes
from node_maintenance.drain.budgets import Coverage
from node_maintenance.drain.planner import plan
from node_maintenance.drain.plans import Attempt, Plan
from node_maintenance.drain.podindex import PodIndex
from node_maintenance.policy.gate import UNKNOWN_RECHECK_SECONDS, Gate
from node_maintenance.runtime import metrics
from node_maintenance.runtime.budgets import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.daemonsets import DaemonSetLookup
from node_maintenance.runtime.executor import EventSink, Executor
from node_maintenance.runtime.leases import LeaseKeeper
from node_maintenance.runtime.policies import Policies

ERROR_RETRY_SECONDS = 5.0
# A drained node's pods are listed again this often (and at each change of the node): pods bound to it later go too.
LATE_PODS_SECONDS = 30.0
# What an engine watches of its own: nothing while it waits in line, the node and its pods while it takes and
# drains it, nothing again once drained (the shared watch of cordoned nodes then shows the node).
NOTHING, NODE_AND_PODS, DRAINED = "nothing", "node and pods", "drained"
# The statuses this engine wrote last: the object kopf shows may lag behind the newest write by a few.
RECENT_WRITES = 16


@dataclass
class Shared:
    """What every drain engine of one reconciler shares."""

    kube: AsyncKube
    budgets: BudgetWatch
    cordoned: CordonedNodes
    active: metrics.Active
    version: str  # the API version the reconciler works in
    event: EventSink
    policies: Policies | None = None
    lease_namespace: str = ""  # where nodes' remediation Leases are held (empty: no coordination)


@dataclass
class Memory:
    """What one engine remembers between steps."""

    stored: dict[str, Any]  # the status as last written (or read)
    written: collections.deque[dict[str, Any]]
    written_at: float = 0.0
    attempts: dict[str, Attempt] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)  # of the node's pods, as last planned: whose budgets wake this drain
    refused_jobs: dict[str, str] = field(default_factory=dict)  # hook Job name -> why the API refused it
    coverage: Coverage | None = None  # which budgets select the pods, kept while the budgets' selectors stay the same
    index: PodIndex | None = None  # the node's pods as planned, kept while they are watched


class Engine:
    def __init__(self, shared: Shared, body: Callable[[], dict[str, Any]], log: logging.LoggerAdapter[logging.Logger],
                 exists: Callable[[str], bool]) -> None:
        """``body``: the NodeMaintenance as last seen, in the working version; ``exists``: whether a NodeMaintenance
        of that name exists (from an index the watch keeps, not a GET per step)."""
        self.shared = shared
        self.exists = exists
        self.body = body
        self.log = log
        first = body()
        self.name: str = first["metadata"]["name"]
        self.node_name: str = first["spec"]["nodeName"]
        self.lease = LeaseKeeper(shared.kube, shared.lease_namespace, self.node_name) if shared.lease_namespace else None
        self.daemonsets = DaemonSetLookup(shared.kube)
        self.executor = Executor(shared.kube, self.name, shared.version, shared.event, log, self.lease)
        self.watching = NOTHING  # what runs of node and pods
        self.wanted = NOTHING  # what the last step needs
        self._watches: dict[str, asyncio.Task[None]] = {}  # "node", "pods" -> the task running that watch
        self.pods_listed = 0.0  # when the node's pods were last known in full (monotonic), once the pod watch has ended
        self.node_changed = False  # since then
        stored = dict(first.get("status") or {})
        self.memory = Memory(stored, collections.deque([stored] if stored else [], maxlen=RECENT_WRITES))
        self._changed = asyncio.Event()

    # A maintenance in line has no watch of its own, nor the objects of one (a thousand in line add up): each is made
    # when first watched, and anew each time.
    @functools.cached_property
    def node(self) -> Mirror:
        return self._node_mirror()

    @functools.cached_property
    def pods(self) -> Mirror:
        return self._pods_mirror()

    def _node_mirror(self) -> Mirror:
        return Mirror(self.shared.kube, node_path(), self._node_change, field_selector=f"metadata.name={self.node_name}", slim=nodes.slim)

    def _pods_mirror(self) -> Mirror:
        return Mirror(self.shared.kube, PODS, self.wake, field_selector=f"spec.nodeName={self.node_name}", slim=pods.slim)

    def wake(self, _key: str | None = None) -> None:
        self._changed.set()

    def _node_change(self, _key: str | None = None) -> None:
        self.node_changed = True
        self.wake()

    async def run(self) -> None:
        shared = self.shared
        shared.budgets.subscribe(self.wake, lambda: self.memory.namespaces)
        try:
            await asyncio.gather(shared.budgets.mirror.synced.wait(), *([shared.policies.ready.wait()] if shared.policies else []))
            while True:
                self._changed.clear()
                try:
                    recheck = await self.step()
                except KubeError as error:  # an API hiccup must not end the maintenance
                    self.log.warning("maintenance step failed; retrying: %s", error)
                    recheck = ERROR_RETRY_SECONDS
                except Exception:  # nor an object of a shape nobody foresaw: said loudly, and tried again
                    self.log.exception("maintenance step failed; retrying")
                    recheck = ERROR_RETRY_SECONDS
                if self.wanted != self.watching:
                    await self._watch(self.wanted)
                    if self.wanted != DRAINED:  # plan again with what is watched now (drained: the step saw it all)
                        continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), recheck)
        finally:
            shared.budgets.unsubscribe(self.wake)
            await self._watch(NOTHING)
            shared.cordoned.unsubscribe(self.node_name)

    async def _watch(self, what: str) -> None:
        """Watch ``what`` from now on: a watch still wanted runs on, one no longer wanted ends, and one started
        anew (what a stopped one kept may be stale) is waited for until listed."""
        wanted = {NOTHING: (), DRAINED: (), NODE_AND_PODS: ("node", "pods")}[what]
        ending = [self._watches.pop(kind) for kind in list(self._watches) if kind not in wanted]
        for task in ending:
            task.cancel()
        await asyncio.gather(*ending, return_exceptions=True)
        if what == DRAINED:  # the pod watch was current until now
            self.pods_listed, self.node_changed = time.monotonic(), False
            self.shared.cordoned.subscribe(self.node_name, self._node_change)
        else:
            self.shared.cordoned.unsubscribe(self.node_name)
        if what == NOTHING:  # back in line: what was indexed of the pods is kept no longer (a new watch brings them anew)
            self.memory.index = None
        started: list[Mirror] = []
        for kind in (kind for kind in wanted if kind not in self._watches):
            if kind == "node":
                self.node = mirror = self._node_mirror()
            else:
                self.pods = mirror = self._pods_mirror()
            self._watches[kind] = asyncio.create_task(mirror.run())
            started.append(mirror)
        self.watching = what
        await asyncio.gather(*(mirror.synced.wait() for mirror in started))

    async def _late_pods(self) -> None:
        """Drained: list the node's pods when the node changed or LATE_PODS_SECONDS have passed since the last listing."""
        if self.node_changed or time.monotonic() - self.pods_listed >= LATE_PODS_SECONDS:
            started, self.node_changed = time.monotonic(), False  # a change from now on asks for the next listing
            await self.pods.refresh()  # a failure leaves it due
            self.pods_listed = started

    def _in_line(self, body: dict[str, Any], now: datetime.datetime) -> tuple[Gate, dict[str, Any] | None] | None:
        """While nothing of its own is watched: the policies' say, judged from their own view of the node, when it is
        a wait (or a hold while they are unknown); None when the drain needs its own watches."""
        policies = self.shared.policies
        if policies is None:
            return None
        node = policies.node(self.node_name)
        if node is None:  # not listed (yet): hold while the policies are unknown, else the drain finds out for itself
            return (Gate(unknown=True, recheck_in=UNKNOWN_RECHECK_SECONDS), None) if policies.unknown() else None
        gate = policies.gate(body, node, now, self.memory.refused_jobs)
        return (gate, node) if gate.waiting or gate.unknown else None

    async def step(self) -> float | None:
        """Read, plan, execute, remember; return when to look again without a change (None: never)."""
        shared, memory = self.shared, self.memory
        body = convert(self.body(), f"{api.GROUP}/{HUB}")  # older versions park spec.drain in an annotation
        if body["metadata"].get("deletionTimestamp"):
            return None  # being deleted: the node is given back, never taken again
        # Someone else wrote the status (a user's patch, another client): it is written again, whatever changed.
        foreign = bookkeeping.foreign_status(body.get("status") or {}, memory.written, shared.version)
        # Our last write may not have come back through kopf's watch yet, and an old version drops fields.
        shown = body.get("status") or {}
        body["status"] = {**shown, **memory.stored}
        if status.timed_out(body["status"]):  # handed back at its timeout: it has ended, watches nothing, takes nothing
            self.wanted = NOTHING
            if status.timed_out(shown):
                return None
            # Not shown as ended yet (its write failed, or has not come back): written again until it is.
            return await self._carry_out(Plan(phase=str(body["status"].get("phase") or ""), status=dict(body["status"])), body, None, True)
        now = timestamps.now()
        if self.watching == NOTHING:
            in_line = self._in_line(body, now)
            if in_line is None:
                self.wanted = NODE_AND_PODS
                return 0.0
            waiting, seen = in_line
            return await self._wait(waiting, body, seen, foreign)
        if self.watching == DRAINED:  # the node as the cordoned nodes' watch shows it; its pods are listed, not watched
            if not shared.cordoned.current():  # not listed yet, or failing: what was known holds (it wakes this when back)
                return ERROR_RETRY_SECONDS
            node = shared.cordoned.node(self.node_name)
            if node is None:  # no longer cordoned (or not shown yet): the drain watches it again, and sees why
                self.wanted = NODE_AND_PODS
                return 0.0
            await self._late_pods()
        else:
            node = next(iter(self.node.objects.values()), None)
        gate = shared.policies.gate(body, node, now, memory.refused_jobs) if shared.policies and node else Gate()
        if gate.unknown or gate.waiting:
            self.wanted = NOTHING
            return await self._wait(gate, body, node, foreign)
        holder = nodes.holder_of(node) if node else None
        holder_exists = bool(holder and holder != self.name and self.exists(holder))
        # The Lease is read when a claim is due and before the node is taken, the pods' DaemonSets once each; neither
        # for a node another maintenance holds. The etcd-quorum guard looks again when a control-plane node is about
        # to be taken, however long this waited.
        taking = node is not None and not holder_exists
        lease = await self.lease.view(fresh=holder != self.name) if self.lease and taking else None
        members = await self._members() if node and holder != self.name and quorum.is_control_plane(node) else None
        node_pods = self._indexed()
        daemonsets = await self.daemonsets.read(node_pods.pods) if taking else {}
        memory.namespaces = {p["metadata"]["namespace"] for p in node_pods.pods}
        budgets = shared.budgets.in_namespaces(memory.namespaces)
        memory.coverage = memory.coverage.over(budgets) if memory.coverage else Coverage(budgets)
        decided = plan(gate.maintenance(body), node, node_pods, budgets, now, holder_exists=holder_exists, daemonsets=daemonsets,
                       attempts=memory.attempts, in_flight=shared.budgets.in_flight(), lease=lease, members=members,
                       coverage=memory.coverage)
        shared.active.holding(self.name, decided.holds_node)
        recheck = await self._carry_out(decided, body, node, foreign, live={p["metadata"]["uid"] for p in node_pods.pods})
        self.wanted = DRAINED if decided.phase == status.Phase.SUCCEEDED and decided.holds_node else NODE_AND_PODS
        if self.wanted == DRAINED:  # no budget paces anything here any more, so none wakes it
            memory.namespaces, memory.coverage, memory.index = set(), None, None
        recheck = bookkeeping.sooner(recheck, LATE_PODS_SECONDS if self.wanted == DRAINED else None)
        recheck = bookkeeping.sooner(recheck, ERROR_RETRY_SECONDS if taking and self.daemonsets.unknown else None)
        return bookkeeping.sooner(recheck, self.lease.due_in() if self.lease and self.lease.known is not None else None)

    def _indexed(self) -> PodIndex:
        """The node's pods as the watch (or the last listing) shows them now, indexed for the planner: the watch keeps
        a changed pod as a new object, and only those are worked out again."""
        memory = self.memory
        if memory.index is None:
            memory.index = PodIndex()
        memory.index.update(self.pods.objects)
        return memory.index

    async def _wait(self, gate: Gate, body: dict[str, Any], node: dict[str, Any] | None, foreign: bool) -> float | None:
        """Not the drain's turn: write the waiting status a policy asks for, or nothing while it is unknown."""
        if gate.waiting is None:  # new, and not yet seen by the policies: decided once it is
            return gate.recheck_in
        self.shared.active.holding(self.name, False)
        # Its place in line is not worth waking it for (the policies do not): it looks at it now and then.
        in_line = gate.waiting.recheck_in or bookkeeping.IN_LINE_STATUS_INTERVAL_SECONDS
        recheck = await self._carry_out(gate.waiting, body, node, foreign, bookkeeping.status_interval(self.memory.stored, gate.waiting.status, in_line))
        return bookkeeping.sooner(recheck, in_line)

    async def _members(self) -> quorum.Members:
        """Every control-plane node as it is now, and the etcd guard budgets the budget watch holds."""
        shared = self.shared
        found: dict[str, dict[str, Any]] = {}
        for label in quorum.CONTROL_PLANE_LABELS:
            listing = await shared.kube.request("GET", node_path(), query={"labelSelector": label})
            found.update({n["metadata"]["name"]: n for n in listing.get("items") or []})
        guards = [b for b in shared.budgets.in_namespaces({quorum.ETCD_GUARD_NAMESPACE}) if b["metadata"]["name"] in quorum.ETCD_GUARD_PDBS]
        return quorum.Members(tuple(found.values()), tuple(guards[:1]))

    async def _carry_out(self, decided: Plan, body: dict[str, Any], node: dict[str, Any] | None, foreign: bool,
                         interval: float = bookkeeping.NM_STATUS_INTERVAL_SECONDS, live: set[str] | None = None) -> float | None:
        """Execute a plan and remember what came back (its status written at most once an ``interval``); when to look again."""
        shared, memory = self.shared, self.memory
        write = bookkeeping.status_due(decided.phase, memory.stored, time.monotonic() - memory.written_at, bool(decided.events), interval)
        sent = bookkeeping.counted(decided.removals)
        for eviction in sent:  # counted before any await, so concurrent drains see it
            shared.budgets.sent(eviction.budget, eviction.pod)
        outcome = await self.executor.run(decided, body, node, memory.attempts, {} if foreign else memory.stored if write else decided.status)
        for eviction in bookkeeping.uncounted(decided.removals, outcome.attempts if not outcome.node_conflict else None):
            shared.budgets.returned(eviction.budget, eviction.pod)
        lease = outcome.lease or decided.lease_seen
        if self.lease and lease:
            self.lease.remember(lease)
        memory.refused_jobs = bookkeeping.merge_refusals(memory.refused_jobs, outcome.refused_jobs)
        if outcome.node_conflict:
            return None  # the node watch brings the node that changed
        recheck = decided.recheck_in
        if live is not None:
            memory.attempts = bookkeeping.merge_attempts(memory.attempts, decided.removals, outcome.attempts or {}, live)
            recheck = bookkeeping.sooner(recheck, bookkeeping.next_try_in(memory.attempts, time.time()))
        if decided.handback is not None:  # the node is given back: ended, whether its status is written yet or not
            memory.stored = decided.status
        if outcome.status_failed:  # written again after a pause, not at once: the API server may be away
            return bookkeeping.sooner(recheck, ERROR_RETRY_SECONDS)
        if write or foreign:
            memory.stored, memory.written_at = decided.status, time.monotonic()
        if outcome.status_written:  # only what was sent tells our writes from someone else's (an empty one matches any)
            memory.written.append(decided.status)
        elif bookkeeping.differs(memory.stored, decided.status, shared.version):
            recheck = bookkeeping.sooner(recheck, memory.written_at + interval - time.monotonic())
        return recheck


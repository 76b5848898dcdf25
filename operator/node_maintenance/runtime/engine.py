"""The drain engine of one NodeMaintenance: read → plan → execute → remember, each time something changes.

Each step reads what it decides from (``runtime.reading.Reading``, frozen: the NodeMaintenance with its stored status,
its node, what the policies know of it, and for a drain step its pods, their budgets, the Lease and the control plane),
plans with pure functions (``policy.terms`` then ``drain.planner``, joined by ``runtime.reading.plan``), has the executor carry the plan out, and remembers what
came back (``drain.memory.remember``, which also says when to look again). What it watches of its own follows the
step's :class:`~node_maintenance.drain.memory.WatchMode` (``drain_watches``). It plans again whenever a watch reports a
change, when the NodeMaintenance changes, or when the plan asked to look again at a given time. A step that finds its
maintenance waiting in line ends the engine (``runtime.maintenances`` starts another when that may change).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from node_maintenance import api
from node_maintenance.api import HUB, timestamps
from node_maintenance.api.conversion import convert
from node_maintenance.api.paths import node_path
from node_maintenance.client.errors import KubeError
from node_maintenance.client.protocol import KubeApi
from node_maintenance.coordination import quorum
from node_maintenance.drain import bookkeeping, budgets, escalation_guard, handback, memory, nodes, status
from node_maintenance.drain.memory import Memory, Outcome, WatchMode
from node_maintenance.drain.plans import Maintenance, Plan
from node_maintenance.drain.podindex import PodIndex
from node_maintenance.policy import terms
from node_maintenance.runtime import control_plane, giving_back, metrics
from node_maintenance.runtime.budget_watch import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.daemonsets import DaemonSetLookup
from node_maintenance.runtime.drain_watches import LATE_PODS_SECONDS, DrainWatches
from node_maintenance.runtime.executor import EventSink, Executor
from node_maintenance.runtime.leases import LeaseKeeper
from node_maintenance.runtime.policies.view import Policies
from node_maintenance.runtime.reading import Reading, plan


@dataclass
class Shared:
    """What every drain engine of one reconciler shares."""

    kube: KubeApi
    budgets: BudgetWatch
    cordoned: CordonedNodes
    active: metrics.Active
    version: str  # the API version the reconciler works in
    event: EventSink
    policies: Policies | None = None
    lease_namespace: str = ""  # where nodes' remediation Leases are held (empty: no coordination)


@dataclass
class Caches:
    """What a drain keeps of its reads while the node's pods are watched: not memory, only the cost of reading again."""

    namespaces: set[str] = field(default_factory=set)  # of the node's pods, as last planned: whose budgets wake this drain
    coverage: budgets.Coverage | None = None  # which budgets select the pods, kept while the budgets' selectors stay the same
    index: PodIndex | None = None  # the node's pods as planned, kept while they are watched


Parked = Callable[[Memory, float | None], None]


class Engine:
    def __init__(self, shared: Shared, body: Callable[[], dict[str, Any]], log: logging.LoggerAdapter[logging.Logger],
                 exists: Callable[[str], bool], parked: Parked | None = None, remembered: Memory | None = None) -> None:
        """``body``: the NodeMaintenance as last seen, in the working version; ``exists``: whether a NodeMaintenance
        of that name exists (from the names a watch keeps, not a GET per step). With ``parked``, a step that finds the
        maintenance waiting in line ends the engine: ``parked`` is told, before it ends, what it remembers and when its
        plan asked to look again (``remembered``: what the engine parked before remembered, for the next)."""
        self.shared = shared
        self.parked = parked
        self.exists = exists
        self.body = body
        first = body()
        self.name: str = first["metadata"]["name"]
        self.node_name: str = first["spec"]["nodeName"]
        self.lease = LeaseKeeper(shared.kube, shared.lease_namespace, self.node_name) if shared.lease_namespace else None
        self.daemonsets = DaemonSetLookup(shared.kube)
        # Its events name the NodeMaintenance in the version it is worked in.
        self.executor = Executor(shared.kube, convert(first, f"{api.GROUP}/{HUB}"), shared.version, shared.event, log, self.lease)
        self.log = log
        self.watches = DrainWatches(shared.kube, shared.cordoned, self.node_name, self.wake)
        self.wanted = WatchMode.NOTHING  # what the last step needs
        # Its NodeMaintenance went without the deletion our finalizer guards (created and deleted while kopf could not
        # add it, kopf's watch broken): kopf calls no deletion handler for it, so the drain ends itself and the node is
        # given back after it (runtime.maintenances).
        self.gone = False
        self.memory = remembered or Memory.of(first.get("status") or {})
        self.in_line = False  # the last step found it waiting in line (or its policies unknown), watching nothing
        self.caches = Caches()
        self._changed = asyncio.Event()

    def wake(self, _key: str | None = None) -> None:
        self._changed.set()

    async def run(self) -> None:
        shared = self.shared
        shared.budgets.subscribe(self.wake, lambda: self.caches.namespaces)
        try:
            await asyncio.gather(shared.budgets.mirror.synced.wait(), *([shared.policies.ready.wait()] if shared.policies else []))
            while True:
                self._changed.clear()
                self.in_line = False
                try:
                    recheck = await self.step()
                    if self.gone:
                        return
                    if self._parks(recheck):
                        return
                except KubeError as error:  # an API hiccup must not end the maintenance
                    self.log.warning("maintenance step failed; retrying: %s", error)
                    recheck = memory.ERROR_RETRY_SECONDS
                except Exception:  # nor an object of a shape nobody foresaw: said loudly, and tried again
                    self.log.exception("maintenance step failed; retrying")
                    recheck = memory.ERROR_RETRY_SECONDS
                if self.wanted != self.watches.mode:
                    await self.watch(self.wanted)
                    if self.wanted != WatchMode.DRAINED:  # plan again with what is watched now (drained: the step saw it all)
                        continue
                # asyncio.timeout (wait_for is banned, pyproject.toml): a deleted maintenance's engine must stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(memory.wait_seconds(recheck)):
                        await self._changed.wait()
        finally:
            shared.budgets.unsubscribe(self.wake)
            await self.watches.stop()

    def _parks(self, recheck: float | None) -> bool:
        """Whether this engine ends here, its maintenance waiting in line: its status written as the line asks (or due
        at ``recheck``), nothing of its own watched, nothing changed since its step. Its supervisor is told at once,
        before any other task runs, so a change after this is heard by the engine started next."""
        if self.parked is None or not self.in_line or self._changed.is_set() or not self.wanted == self.watches.mode == WatchMode.NOTHING:
            return False
        self.parked(self.memory, recheck)
        return True

    async def watch(self, mode: WatchMode) -> None:
        """Watch as ``mode`` says from now on; back in line, what was indexed of the pods is kept no longer."""
        if mode == WatchMode.NOTHING:
            self.caches.index = None
        await self.watches.watch(mode)

    async def step(self) -> float | None:
        """Read, plan, execute, remember; return when to look again without a change (None: never)."""
        reading = await self.read(self.body())
        if not isinstance(reading, Reading):
            return reading  # nothing to plan now: look again then
        decided = plan(reading)
        outcome, carried = await self.execute(decided, reading)
        # Gone on the API server's word: a 404 naming the object, not a version it does not serve (yet). The names watched
        # are no proof either way: a watch that relists never tells of an object that went meanwhile.
        self.gone = outcome.missing
        # The drain is counted from the instant this step decided on, not from after it was carried out.
        seen = memory.seen(self.memory, decided.status, memory.Clock(reading.now.timestamp(), reading.monotonic))
        done = memory.Clock(timestamps.now().timestamp(), asyncio.get_running_loop().time())
        self.memory, recheck = memory.remember(seen, decided, outcome, done, carried, self.shared.version)
        self.wanted = memory.watch_mode(ended=reading.maintenance is None, waits=reading.waits, plan=decided)
        return memory.sooner(recheck, self._look_again(reading))

    def _look_again(self, reading: Reading) -> float | None:
        """When to look again whatever the plan said: in line, when the wait says (a window's opening; the policies tell
        of every other change, and a rewording held back is due when the plan's memory says); drained, for late pods;
        for a DaemonSet that could not be read, or the Lease's next renewal."""
        if reading.waits and reading.maintenance is not None:
            waiting = reading.maintenance.terms.waiting
            return waiting.recheck_in if waiting is not None else None
        if reading.live is None:
            return None
        if self.wanted == WatchMode.DRAINED:  # no budget paces anything here any more, so none wakes it
            self.caches = Caches()
        # Drained already: when the next listing is due, which a step woken for another reason (a Lease renewal, its own
        # status coming back) does not put off; drained by this step: a whole interval from now.
        drained_before = self.watches.mode == WatchMode.DRAINED
        recheck = (self.watches.late_pods_due_in() if drained_before else LATE_PODS_SECONDS) if self.wanted == WatchMode.DRAINED else None
        recheck = memory.sooner(recheck, memory.ERROR_RETRY_SECONDS if reading.taking and self.daemonsets.unknown else None)
        return memory.sooner(recheck, self.lease.due_in() if self.lease and self.lease.known is not None else None)

    async def read(self, shown_body: dict[str, Any]) -> Reading | float | None:
        """What this step decides from (``shown_body``: the NodeMaintenance as last seen, in the working version), or when
        to look again when there is nothing to decide yet."""
        shared, body = self.shared, convert(shown_body, f"{api.GROUP}/{HUB}")  # older versions park spec.drain in an annotation
        if body["metadata"].get("deletionTimestamp"):
            return None  # being deleted: the node is given back, never taken again
        remembered = self.memory = memory.shown(self.memory, body.get("status") or {}, shared.version)
        # Someone else wrote the status (a user's patch, another client): it is written again, whatever changed.
        foreign = bookkeeping.foreign_status(body.get("status") or {}, remembered.written, shared.version)
        # Our last write may not have come back through kopf's watch yet, and an old version drops fields.
        shown = body.get("status") or {}
        body["status"] = {**shown, **remembered.stored}
        if status.timed_out(body["status"]):  # handed back at its timeout: it has ended, watches nothing, takes nothing
            self.wanted, self.caches = WatchMode.NOTHING, Caches()
            return await self._ended(body, shown)
        now, at = timestamps.now(), asyncio.get_running_loop().time()
        node = await self._node()
        if isinstance(node, float):
            return node
        in_line = self.watches.mode == WatchMode.NOTHING
        seen = shared.policies.seen(body, node, now) if shared.policies and (node is not None or in_line) else terms.Seen(node)
        m = terms.maintenance(body, seen, remembered.refused_jobs, now)
        if m.terms.undecided:  # not yet seen by the policies, or unknown: decided once they are
            self.wanted = WatchMode.NOTHING
            self.in_line = in_line
            return m.terms.hold_recheck_in
        if m.terms.waiting is not None:  # not the drain's turn: the waiting status a policy asks for is written
            self.shared.active.holding(self.name, False)
            self.in_line = in_line
            return Reading(body, foreign, now, at, m, None if seen.node is None else dict(seen.node), waits=True)
        if in_line:  # the drain needs its own watches: planned again with them
            self.wanted = WatchMode.NODE_AND_PODS
            return 0.0
        return await self._read_drain(body, foreign, now, at, m, node)

    async def _ended(self, body: dict[str, Any], shown: dict[str, Any]) -> Reading | None:
        """An ended maintenance reads its node, whose hand-back its status records may have been cut short (a node changed under
        it, a restart, a new leader); its status not shown as ended is written again until it is. None: nothing left to do."""
        shown_ended = status.timed_out(shown)
        if shown_ended and self.memory.given_back:
            return None  # given back by this drain: nothing is left to read
        node, coordinated = await self.shared.kube.get(node_path(self.node_name)), self.lease is not None
        if shown_ended and handback.unfinished(self.name, self.node_name, node, coordinated) is None:
            return None
        return Reading(body, not shown_ended, timestamps.now(), asyncio.get_running_loop().time(), None, node, coordinated=coordinated)

    async def _node(self) -> dict[str, Any] | float | None:
        """The node as this drain sees it now (None: not there, or in line: not watched); a float: look again then."""
        mode = self.watches.mode
        if mode == WatchMode.DRAINED:  # the node as the cordoned nodes' watch shows it; its pods are listed, not watched
            if not self.shared.cordoned.current():  # not listed yet, or failing: what was known holds (it wakes this when back)
                return memory.ERROR_RETRY_SECONDS
            node = self.shared.cordoned.node(self.node_name)
            if node is None:  # no longer cordoned (or not shown yet): the drain watches it again, and sees why
                self.wanted = WatchMode.NODE_AND_PODS
                return 0.0
            await self.watches.late_pods()
            return node
        return self.watches.own_node() if mode == WatchMode.NODE_AND_PODS else None

    async def _read_drain(self, body: dict[str, Any], foreign: bool, now: datetime.datetime, at: float, m: Maintenance,
                          node: dict[str, Any] | None) -> Reading:
        """What a drain step reads beyond its node: the pods, their budgets and DaemonSets, the Lease, the control plane
        (``now`` and ``at``: the wall and monotonic clocks the step decides on)."""
        shared, caches = self.shared, self.caches
        holder = nodes.holder_of(node) if node else None
        holder_exists = nodes.live_holder(node, self.exists) not in (None, self.name)
        # The Lease is read when a claim is due and before the node is taken, the pods' DaemonSets once each; neither
        # for a node another maintenance holds. The etcd-quorum guard looks again when a control-plane node is about
        # to be taken, however long this waited, and before an escalation step deletes pods on one.
        taking = node is not None and not holder_exists
        lease = await self.lease.view(fresh=holder != self.name) if self.lease and taking else None
        m = dataclasses.replace(m, counted=memory.counted(self.memory, m.status.get("drainStartTime"), at))
        guarded = holder != self.name or escalation_guard.due(m, now)
        members = await control_plane.members(shared.kube, shared.budgets) if node and guarded and quorum.is_control_plane(node) else None
        if caches.index is None:
            caches.index = PodIndex()
        caches.index.update(self.watches.pod_objects())  # only the pods the watch changed are worked out again
        node_pods = caches.index
        daemonsets = await self.daemonsets.read(node_pods.pods) if taking else {}
        caches.namespaces = {p["metadata"]["namespace"] for p in node_pods.pods}
        in_namespaces = shared.budgets.in_namespaces(caches.namespaces)
        caches.coverage = caches.coverage.over(in_namespaces) if caches.coverage else budgets.Coverage(in_namespaces)
        return Reading(body, foreign, now, at, m, node, frozenset(p["metadata"]["uid"] for p in node_pods.pods),
                       pods=node_pods, disruption_budgets=in_namespaces, coverage=caches.coverage, lease=lease, members=members, daemonsets=daemonsets,
                       in_flight=shared.budgets.in_flight(), attempts=self.memory.attempts, holder_exists=holder_exists,
                       taking=taking)

    async def execute(self, decided: Plan, reading: Reading) -> tuple[Outcome, memory.Carried]:
        """Carry out a plan, its status written at most once an interval while the phase stays (in line, and saying nothing
        new but its messages, at the pace of the line); what it met, and how it was carried out."""
        shared, remembered = self.shared, self.memory
        in_line = bookkeeping.waiting_pace(reading.maintenance) if reading.waits and reading.maintenance is not None else None
        interval = bookkeeping.NM_STATUS_INTERVAL_SECONDS if in_line is None else bookkeeping.status_interval(remembered.stored, decided.status, in_line)
        write_in = bookkeeping.next_write_in(remembered.written_at, interval, asyncio.get_running_loop().time())
        due = bookkeeping.status_due(decided.phase, remembered.stored, write_in, bool(decided.events))
        write = due or bookkeeping.records_more(remembered.stored, decided.status)  # the workloads of pods about to leave: recorded first
        if reading.live is not None:
            shared.active.holding(self.name, decided.holds_node)
        for eviction in bookkeeping.counted(decided.removals):  # counted before any await, so concurrent drains see it
            shared.budgets.sent(eviction.budget, eviction.pod, bypassing=eviction.bypassing)
        stored = {} if reading.foreign else remembered.stored if write else decided.status
        # onTimeout HandBack gives the node back as a deletion does: under waitForHealthy, once recorded as recovering.
        policies = shared.policies
        ready = (functools.partial(giving_back.recovering, policies, {**reading.body, "status": decided.status})
                 if policies and decided.handback is not None else None)
        outcome = await self.executor.run(decided, reading.node, remembered.attempts, dict(stored), reading.body["metadata"]["resourceVersion"], ready)
        for eviction in bookkeeping.uncounted(decided.removals, outcome.attempts if not outcome.node_conflict else None):
            shared.budgets.returned(eviction.budget, eviction.pod)
        lease = outcome.lease or decided.lease_seen
        if self.lease and lease:
            self.lease.remember(lease)
        return outcome, memory.Carried(write, reading.foreign, interval, reading.live)

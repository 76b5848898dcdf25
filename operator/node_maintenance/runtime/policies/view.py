"""NodeMaintenancePolicies at run time, as the drains and the hand-backs see them.

Nothing here runs (and every drain goes on as before) while the API server answers that the policy CRD does not
exist. Anything short of that answer fails closed: until the CRD has been read and every watch has listed, and
whenever a read fails, no maintenance takes a node. Drains that hold theirs keep the rules and hooks last read, once
read at all.

A drain asks once per step (:meth:`Policies.seen`) and gets one frozen snapshot of what the policies know of it; the
pure ``policy.terms`` turns that into the planner's input. The parts, one job each: ``discovery`` (the CRD),
``watches`` (and their fan-out), ``decisions`` (the cache and its timers), ``recovery`` (waitForHealthy),
``publisher`` (the policies' status).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.client.protocol import KubeApi
from node_maintenance.drain import nodes
from node_maintenance.policy import health, hooks, line, model, terms
from node_maintenance.runtime.policies import discovery
from node_maintenance.runtime.policies.decisions import Decisions
from node_maintenance.runtime.policies.publisher import StatusPublisher
from node_maintenance.runtime.policies.recovery import Recovery
from node_maintenance.runtime.policies.watches import PolicyWatches, Watched

log = logging.getLogger(__name__)


class Policies:
    def __init__(self, kube: KubeApi, namespace: str, on_change: Callable[[Collection[str] | None], None], jobs_namespace: str = "") -> None:
        """``on_change`` is told the maintenances whose say from the policies may have changed (None: any); hook Jobs are
        watched in ``jobs_namespace`` (empty: every namespace, where they run)."""
        self.kube = kube
        self.namespace = namespace  # the operator's own, where no hook Job runs
        self.jobs_namespace = jobs_namespace
        self.ready = asyncio.Event()  # set after the first look at the CRD, whatever it found
        self.served = False  # the CRD is served: the watches run
        self.absent = False  # the API server answered that the CRD does not exist: no policy applies
        self.trouble = ""  # why the CRD's last look did not tell that policies are served ("" when it did)
        self.decisions = Decisions(self, on_change)
        self.watches: PolicyWatches | None = None
        self.recovery: Recovery | None = None
        self.publisher: StatusPublisher | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # ----------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        try:
            while True:
                await self.look()
                self.ready.set()
                await asyncio.sleep(discovery.CRD_CHECK_SECONDS)
        finally:
            await self.stop()

    async def look(self) -> None:
        """Read the CRD: start the watches once it is served, stop them only when it does not exist."""
        trouble = self.trouble
        found = await discovery.look(self.kube)
        if found.absent is not None:
            self.absent = found.absent
        self.trouble = found.trouble
        if found.absent and self.served:
            await self.stop()
            log.info("the NodeMaintenancePolicy CRD is gone: maintenances follow no policy")
        elif found.serving and not self.served:
            self._start()
        if self.trouble != trouble:
            if self.trouble:
                log.warning("%s; no maintenance takes a node until it is", self.trouble)
            self.decisions.on_change(None)

    def _start(self) -> None:
        self.watches = watches = PolicyWatches(self.kube, self.decisions, self.jobs_namespace)
        self.recovery = recovery = Recovery(self.kube, self.decisions.workload_changed)
        self.publisher = publisher = StatusPublisher(self.kube, watches, self.decisions, recovery)
        self.decisions.serve(watches, recovery, publisher.stored)
        self._tasks = [*watches.start(), asyncio.create_task(publisher.run(), name="policy status")]
        self.served = True
        log.info("NodeMaintenancePolicies are served: maintenances follow them once they are read")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.decisions.stop()
        if self.watches is not None:
            self.watches.stop()
        if self.recovery is not None:
            await self.recovery.stop()
        self._tasks, self.served, self.watches, self.recovery, self.publisher = [], False, None, None, None

    # ----------------------------------------------------------------- what is known
    def unknown(self) -> str:
        """Why the policies are not known now, "" when they are: the CRD unread or failing, a watch that has
        not listed yet or whose last read failed."""
        if self.trouble:
            return self.trouble
        if self.absent:
            return ""
        if not self.served or self.watches is None:
            return "the NodeMaintenancePolicy CRD has not been read yet"
        return self.watches.trouble()

    def node(self, name: str) -> dict[str, Any] | None:
        """The node as the policies' watch keeps it (what the decisions read), once listed; None otherwise."""
        return self.watches.node(name) if self.watches is not None else None

    def seen(self, body: Mapping[str, Any], node: Mapping[str, Any] | None, now: datetime.datetime) -> terms.Seen:
        """What the policies know of the maintenance ``body`` now, judged on ``node`` (the drain's view of its node;
        None while the drain watches nothing of its own: the policies' own view is used). Reads only."""
        name, node_name = body["metadata"]["name"], body["spec"]["nodeName"]
        own = self.node(node_name)
        shown = own if node is None else node
        why = self.unknown()
        watches = self.watches
        if watches is None or not self.served or shown is None:
            return terms.Seen(node=shown, unknown=why, operator_namespace=self.namespace)
        policies = watches.policies()
        kept = watches.maintenance(name)
        # One that holds its node, as the policies' watches show them, is decided on its own: no line decides it.
        holds = kept is not None and not kept["metadata"].get("deletionTimestamp") and own is not None and nodes.holder_of(own) == name
        verdict = None
        # A holder keeps the rules last read, unless its node was taken under a policy this operator never saw.
        kept_rules = watches.synced() and watches.unseen.never_seen(shown) is None
        if not why or (kept_rules and nodes.holder_of(dict(shown)) == name):
            verdict = line.holding(policies, own, now) if holds and own is not None else self.decisions.verdict(name)
        return terms.Seen(node=shown, unknown=why, served=True, synced=kept_rules, verdict=verdict, listed=kept is not None,
                          selected=bool(model.governing(policies, shown)), operator_namespace=self.namespace,
                          pre_drain_job=watches.job(verdict.policy.hook_namespace(hooks.PRE_DRAIN), hooks.job_name(hooks.PRE_DRAIN, body))
                          if verdict is not None and verdict.policy is not None else None)

    # ----------------------------------------------------------------- for the hand-back
    def governing(self, node_name: str, holder: str) -> list[model.Policy] | None:
        """The policies governing the node that ``holder`` holds, as the watches show it; None when it does not hold it."""
        node = self.watches.node(node_name) if self.watches is not None else None
        if node is None or nodes.holder_of(node) != holder or self.watches is None:
            return None
        names = self.watches.governing().get(node_name, ())
        return [p for p in self.watches.policies() if p.name in names]

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.watches.job(namespace, name) if self.watches is not None else None

    async def recover(self, policy: str, node: str, workloads: Iterable[Mapping[str, Any]], taken: datetime.datetime | None) -> None:
        """Under waitForHealthy, the node's slot stays in use once it is given back: its policy's status records it
        first (a restart keeps it). Raises the API's error while that is not written.

        ``taken``: when the maintenance giving it back took it (its drainStartTime). An entry since then is this
        maintenance's own (a deletion after its timeout's hand-back): it stands, its wait counting on. An older entry is
        an earlier maintenance's, whose workloads were still short when the node was taken again: the new entry waits
        for what both drains evicted, from now. This maintenance's own entry made by a try whose write failed is in
        memory only: it is written now, or the hand-back waits again (a restart would lose it, and the slot)."""
        assert self.recovery is not None and self.publisher is not None, "recovered only while the policies are served"
        stored = self.publisher.stored(policy)
        earlier = next((e for e in self.recovery.entries(policy, stored) if e["node"] == node), None)
        if earlier is not None and (taken is None or timestamps.parse(earlier["since"]) >= taken):
            if node not in health.listed(stored):
                await self.publisher.write()
            return
        self.recovery.give_back(policy, node, [*((earlier or {}).get("workloads") or ()), *workloads])
        self.decisions.invalidate()
        await self.publisher.write()

    def feed(self, kind: Watched, event: str, obj: dict[str, Any]) -> None:
        """Take a watch event of ``kind`` as its watch would (how tests bring changes without a server)."""
        assert self.watches is not None, "fed only while the policies are served"
        self.watches.feed(kind, event, obj)

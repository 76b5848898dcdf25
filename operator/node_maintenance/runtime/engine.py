"""The drain engine of one NodeMaintenance: watches feed the planner, the executor acts, repeat.

One watch of the node and one of the pods bound to it (both scoped by field selector), plus the
budget watch all drains share. The engine plans again whenever one of them reports a change, when
the NodeMaintenance changes, or when the plan asked to look again at a given time; a drained node
costs no requests until something changes on it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from node_maintenance import api
from node_maintenance.api import HUB, timestamps
from node_maintenance.api.conversion import convert, status_fields
from node_maintenance.api.paths import nm_path, node_path
from node_maintenance.client.http import AsyncKube
from node_maintenance.client.watch import Mirror
from node_maintenance.coordination import remediation as rem
from node_maintenance.drain import node as nodes
from node_maintenance.drain import pods
from node_maintenance.drain import status as st
from node_maintenance.drain.planner import Attempt, Plan, plan
from node_maintenance.runtime import metrics
from node_maintenance.runtime.budgets import BudgetWatch
from node_maintenance.runtime.executor import EventSink, Executor
from node_maintenance.runtime.policies import Gate, Policies

# While the phase stays the same, the status is written at most this often (a drain of many pods
# would otherwise write it once per pod); a new phase is written at once.
NM_STATUS_INTERVAL_SECONDS = 2.0
ERROR_RETRY_SECONDS = 5.0
# The statuses this engine wrote last: the object kopf shows may lag behind the newest write by a few.
RECENT_WRITES = 16


class Engine:
    def __init__(self, kube: AsyncKube, budgets: BudgetWatch, active: metrics.Active, body: Callable[[], dict[str, Any]],
                 version: str, event: EventSink, log: logging.LoggerAdapter, policies: Policies | None = None,
                 lease_namespace: str = "") -> None:
        """``lease_namespace``: where the node's remediation Lease is held (empty: no coordination)."""
        self.kube = kube
        self.budgets = budgets
        self.active = active
        self.body = body  # the NodeMaintenance as last seen, in the working version
        self.version = version
        self.log = log
        first = body()
        self.name = first["metadata"]["name"]
        self.node_name = first["spec"]["nodeName"]
        self.executor = Executor(kube, self.name, version, event, log)
        self.node = Mirror(kube, node_path(), self.wake, field_selector=f"metadata.name={self.node_name}")
        self.pods = Mirror(kube, "/api/v1/pods", self.wake, field_selector=f"spec.nodeName={self.node_name}", slim=pods.slim)
        self.policies = policies
        self.lease = rem.LeaseKeeper(kube, lease_namespace, self.node_name) if lease_namespace else None
        self.attempts: dict[str, Attempt] = {}
        self.namespaces: set[str] = set()  # of the node's pods, as last planned: whose budgets wake this drain
        self.stored: dict[str, Any] = dict(first.get("status") or {})  # the status as last written (or read)
        self.written: collections.deque[dict[str, Any]] = collections.deque([self.stored] if self.stored else [], maxlen=RECENT_WRITES)
        self.written_at = 0.0
        self._changed = asyncio.Event()

    def wake(self, _namespace: str | None = None) -> None:
        self._changed.set()

    async def run(self) -> None:
        watches = [asyncio.create_task(self.node.run()), asyncio.create_task(self.pods.run())]
        self.budgets.subscribe(self.wake, lambda: self.namespaces)
        try:
            await asyncio.gather(self.node.synced.wait(), self.pods.synced.wait(), self.budgets.mirror.synced.wait(),
                                 *([self.policies.ready.wait()] if self.policies else []))
            while True:
                self._changed.clear()
                try:
                    recheck = await self.step()
                except Exception:  # an API hiccup must not end the maintenance
                    self.log.exception("maintenance step failed; retrying")
                    recheck = ERROR_RETRY_SECONDS
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), recheck)
        finally:
            self.budgets.unsubscribe(self.wake)
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)

    async def step(self) -> float | None:
        """Plan once and carry the plan out; return when to look again without a change (None: never)."""
        body = convert(self.body(), f"{api.GROUP}/{HUB}")  # older versions park spec.drain in an annotation
        if body["metadata"].get("deletionTimestamp"):
            return None  # being deleted: the node is given back, never taken again
        # Someone else wrote the status (a user's patch, another client): it is written again, whatever changed.
        foreign = foreign_status(body.get("status") or {}, self.written, self.version)
        # Our last write may not have come back through kopf's watch yet, and an old version drops fields.
        body["status"] = {**(body.get("status") or {}), **self.stored}
        node = next(iter(self.node.objects.values()), None)
        now = datetime.datetime.now(datetime.UTC)
        gate = await self.policies.gate(body, node, now) if self.policies else Gate()
        if gate.unknown:  # new, and not yet seen by the policies: decided once it is
            return gate.recheck_in
        if gate.waiting:  # a policy has no slot for it yet: nothing but the status is written
            return await self._wait(gate.waiting, body, node)
        holder = nodes.holder_of(node) if node else None
        holder_exists = bool(holder and holder != self.name and await self.kube.get(nm_path(holder, version=self.version)))
        # The Lease is held before the node is taken, and kept while it is; never for a node another maintenance holds.
        lease = await self.lease.hold(node) if self.lease and node and not holder_exists else None
        node_pods = list(self.pods.objects.values())
        self.namespaces = {p["metadata"]["namespace"] for p in node_pods}
        budgets = self.budgets.in_namespaces(self.namespaces)
        decided = plan(gate.maintenance(body), node, node_pods, budgets, now, holder_exists=holder_exists,
                       attempts=self.attempts, in_flight=self.budgets.in_flight(), lease=lease)
        gate.record(decided.status, body["metadata"].get("generation", 1), now)
        if lease:
            decided.status["conditions"] = st.set_condition(decided.status["conditions"], rem.CONDITION, *lease.condition(),
                                                            generation=body["metadata"].get("generation", 1), now=timestamps.rfc3339(now))
        for removal in decided.removals:  # counted before any await, so concurrent drains see it
            if removal.budget:
                self.budgets.sent(removal.budget, removal.name)
        self.active.holding(self.name, decided.holds_node)
        write = self._status_due(decided.phase) or bool(decided.events)  # an event's cause is recorded at once, so it fires once
        outcome = await self.executor.run(decided, body, node, self.attempts, {} if foreign else self.stored if write else decided.status)
        if outcome.node_conflict:
            for removal in decided.removals:
                if removal.budget:
                    self.budgets.returned(removal.budget, removal.name)
            return None  # the node watch brings the node that changed
        for removal in decided.removals:
            attempt = (outcome.attempts or {}).get(removal.uid)
            if removal.budget and not (attempt and attempt.accepted):
                self.budgets.returned(removal.budget, removal.name)
            if attempt is None:
                self.attempts.pop(removal.uid, None)
            else:
                self.attempts[removal.uid] = attempt
        live = {p["metadata"]["uid"] for p in node_pods}
        self.attempts = {uid: a for uid, a in self.attempts.items() if uid in live}
        rechecks = (decided.recheck_in, gate.recheck_in, lease.recheck_in if lease else None)
        recheck = min((r for r in rechecks if r is not None), default=None)
        if write or foreign:
            self.stored, self.written_at = decided.status, time.monotonic()
            self.written.append(decided.status)
        elif _differs(self.stored, decided.status, self.version):
            flush = self.written_at + NM_STATUS_INTERVAL_SECONDS - time.monotonic()
            recheck = flush if recheck is None else min(recheck, flush)
        return recheck

    async def _wait(self, waiting: Plan, body: dict[str, Any], node: dict[str, Any] | None) -> float | None:
        self.active.holding(self.name, False)
        write = self._status_due(waiting.phase) or bool(waiting.events)
        await self.executor.run(waiting, body, node, {}, self.stored if write else waiting.status)
        if write:
            self.stored, self.written_at = waiting.status, time.monotonic()
            self.written.append(waiting.status)
            return None
        return NM_STATUS_INTERVAL_SECONDS if _differs(self.stored, waiting.status, self.version) else None

    def _status_due(self, phase: str) -> bool:
        return phase != self.stored.get("phase") or time.monotonic() - self.written_at >= NM_STATUS_INTERVAL_SECONDS


def foreign_status(observed: dict[str, Any], written: Iterable[dict[str, Any]], version: str) -> bool:
    """Whether someone else wrote the status the object shows: a field this engine writes holds a value
    none of its recent writes gave it (``lastUpdate`` aside). Fields it never writes are not its concern."""
    held = status_fields(version)
    recent = list(written)
    return bool(recent) and not any(
        all(observed.get(key) == value for key, value in ours.items() if key in held and key != "lastUpdate") for ours in recent
    )


def _differs(stored: dict[str, Any], new: dict[str, Any], version: str) -> bool:
    held = status_fields(version)
    return not st.same({k: v for k, v in stored.items() if k in held}, {k: v for k, v in new.items() if k in held})

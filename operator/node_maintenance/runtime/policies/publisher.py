"""The policies' status: written when it changes, at most once a POLICY_STATUS_INTERVAL_SECONDS, each round from one
consistent snapshot of the decision and the recovering nodes.

The snapshot is taken before the first write of a round: a node given back while a write is on its way is not in
it, stays among the nodes given back, and is written in the next round. So no interleaving of writes and hand-backs
drops a recovering node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import conditions, timestamps
from node_maintenance.api.paths import policy_path
from node_maintenance.client.protocol import KubeApi
from node_maintenance.policy import health, policy_status, verdicts
from node_maintenance.runtime import status_writes
from node_maintenance.runtime.policies.decisions import Decisions
from node_maintenance.runtime.policies.recovery import Recovery
from node_maintenance.runtime.policies.watches import PolicyWatches

POLICY_STATUS_INTERVAL_SECONDS = 1.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """One policy's status inputs, all taken at one moment."""

    body: Mapping[str, Any]
    summary: verdicts.Summary
    entries: tuple[Mapping[str, Any], ...]  # its recovering nodes, given back ones included
    judged: Mapping[str, health.Judgement]
    given_back: frozenset[str]  # the nodes given back that this write records
    gave_up: str | None
    waits: bool  # it waits for health


class StatusPublisher:
    """The one writer of the policies' status."""

    def __init__(self, kube: KubeApi, watches: PolicyWatches, decisions: Decisions, recovery: Recovery) -> None:
        self.kube = kube
        self.watches = watches
        self.decisions = decisions
        self.recovery = recovery
        self._written: dict[str, dict[str, Any]] = {}
        self._writing = asyncio.Lock()

    def stored(self, name: str) -> Mapping[str, Any]:
        """The policy's status as last written (we are its only writer), else as stored."""
        written = self._written.get(name)
        return written if written is not None else self.watches.status(name)

    async def run(self) -> None:
        """Write each policy's status when it changes, at most once a POLICY_STATUS_INTERVAL_SECONDS."""
        dirty = self.decisions.dirty
        while True:
            await dirty.wait()
            dirty.clear()
            if not self.watches.synced():  # a status from half the objects would be wrong; each listing sets it dirty again
                continue
            try:
                await self.write()
            except Exception as error:  # tried again after the pause
                log.warning("writing NodeMaintenancePolicy statuses failed: %s", str(error) or type(error).__name__)
                dirty.set()
            await asyncio.sleep(POLICY_STATUS_INTERVAL_SECONDS)

    async def write(self) -> None:
        """Write every policy's status that changed, from one snapshot."""
        async with self._writing:
            for snapshot in self._snapshot():
                await self._write(snapshot)

    def _snapshot(self) -> list[Snapshot]:
        decision = self.decisions.decision()
        judged = self.recovery.last.judged
        waiting = {p.name for p in self.watches.policies() if p.wait_for_healthy}
        taken = []
        for body in self.watches.policy_bodies():
            name = body["metadata"]["name"]
            summary = decision.summaries.get(name)
            if summary is None:
                continue
            taken.append(Snapshot(body, summary, tuple(self.recovery.entries(name, self.stored(name))), dict(judged.get(name, {})),
                                  frozenset(self.recovery.given_back.get(name, {})), self.recovery.gave_up.get(name), name in waiting))
        return taken

    async def _write(self, snapshot: Snapshot) -> None:
        body = snapshot.body
        name, generation = body["metadata"]["name"], body["metadata"].get("generation", 1)
        previous = self._written.get(name) or body.get("status") or {}
        now = timestamps.rfc3339(timestamps.now())
        status = policy_status.policy_status(body.get("status") or {}, snapshot.summary, generation, now)
        if snapshot.entries or snapshot.waits:
            before: Mapping[str, Any] = next((c for c in previous.get("conditions") or () if c.get("type") == health.CONDITION), {})
            recovering, (state, reason, message) = health.status(snapshot.entries, snapshot.judged, snapshot.gave_up or "", before)
            recovered = conditions.Condition(health.CONDITION, state, reason, message)
            status = {**status, "recovering": recovering,
                      "conditions": conditions.with_conditions(status["conditions"], (recovered,), generation=generation, now=now)}
        written = self._written.get(name)
        # Once this process has written a status, that is what the next is compared with: the watch may lag behind it,
        # or show a write whose answer was lost, which this process does not count as written (nor what it recorded).
        unchanged = status == written if written is not None else policy_status.same_status(body.get("status") or {}, status)
        if not unchanged:
            was = health.listed(self.stored(name))  # a replaced policy's carried over, too
            await status_writes.write_status(self.kube, policy_path(name), body["metadata"]["resourceVersion"], status)
            self._written[name] = status
            if was - health.listed(status):  # a node's slot, kept while the status listed it, is free now
                self.decisions.recovery_changed()
        self.recovery.written(name, snapshot.given_back, snapshot.gave_up)  # the status holds them from now on

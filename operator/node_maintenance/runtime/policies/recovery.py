"""waitForHealthy at run time: the watches of the workloads a node given back waits for, the nodes given back
that their policy's status does not record yet, when this process first saw each given back (its wait is counted
from then on the event loop's monotonic clock), and how each recovering node was last judged (``policy.health``).

The budgets, ReplicaSets and StatefulSets are watched only while some policy waits for health. A workload whose
watch has not listed or is failing counts as not healthy: its node keeps its slot.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.client.protocol import KubeApi
from node_maintenance.client.watch import Mirror
from node_maintenance.drain import evicted
from node_maintenance.policy import health, model
from node_maintenance.runtime import budget_watch

# What waitForHealthy judges a workload by, by kind.
HEALTH_PATHS = {evicted.Kind.BUDGET: budget_watch.PATH, evicted.Kind.REPLICA_SET: "/apis/apps/v1/replicasets",
                evicted.Kind.STATEFUL_SET: "/apis/apps/v1/statefulsets"}
log = logging.getLogger(__name__)


class Recovery:
    """The recovering nodes of every policy, and the watches that judge them."""

    def __init__(self, kube: KubeApi, on_change: Callable[[str | None], None]) -> None:
        """``on_change`` hears of a change of a workload some recovering node waits for (None: of any)."""
        self.kube = kube
        self.on_change = on_change
        self.mirrors: dict[str, Mirror] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.given_back: dict[str, dict[str, dict[str, Any]]] = {}  # policy -> node -> its entry, not in the status yet
        self.last: health.Recovery = health.Recovery({}, {}, {}, None, frozenset())
        self.gave_up: dict[str, str] = {}  # policy -> why its last wait was given up, until its status says so
        self.seen_back: dict[tuple[str, str], float] = {}  # entry (health.key) -> the loop's clock when its node was first seen given back

    def entries(self, policy: str, stored: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The policy's recovering nodes: those its status (``stored``) records, and those given back since."""
        entries = {e["node"]: e for e in stored.get("recovering") or ()}
        return list({**entries, **self.given_back.get(policy, {})}.values())

    def give_back(self, policy: str, node: str, workloads: Iterable[Mapping[str, Any]]) -> None:
        """``node`` is given back now under ``policy``'s waitForHealthy, waiting for ``workloads``."""
        self.given_back.setdefault(policy, {})[node] = health.entry(node, workloads, timestamps.now())

    def written(self, policy: str, nodes: Collection[str], gave_up: str | None) -> None:
        """``policy``'s status now records ``nodes`` given back and the wait given up (``gave_up``)."""
        for node in nodes:
            self.given_back.get(policy, {}).pop(node, None)
        if gave_up is not None and self.gave_up.get(policy) == gave_up:
            del self.gave_up[policy]

    def judge(self, policies: list[model.Policy], stored: Callable[[str], Mapping[str, Any]], now: datetime.datetime,
              held: Callable[[str], bool]) -> health.Recovery:
        """Judge every recovering node (dropped once its workloads are healthy, or the cap passed, or its policy no
        longer waits for health); ``stored``: a policy's status as last written or read; ``held``: whether a
        NodeMaintenance holds a node now (its wait has not begun)."""
        self._watch(any(p.wait_for_healthy for p in policies))
        unknown = {kind: (f"the {kind}s have not been listed yet" if not m.synced.is_set() else f"the watch of {kind}s failed: {m.failure}")
                   for kind, m in self.mirrors.items() if not m.synced.is_set() or m.failure}
        unknown |= {kind: f"the {kind}s are not watched" for kind in HEALTH_PATHS if kind not in self.mirrors}
        statuses = {p.name: stored(p.name) for p in policies}
        entries = {p.name: self.entries(p.name, statuses[p.name]) for p in policies if p.wait_for_healthy}
        workloads = {(w["kind"], w["namespace"], w["name"]) for listed in entries.values() for e in listed for w in e.get("workloads") or ()}
        objects = {w: self.mirrors[w[0]].objects.get(f"{w[1]}/{w[2]}") if w[0] in self.mirrors else None for w in workloads}
        caps = {p.name: p.wait_for_healthy_seconds if p.wait_for_healthy else None for p in policies}
        listed = {name: health.listed(status) for name, status in statuses.items()}
        self.last = judged = health.judge_all(caps, entries, objects, unknown, self.last.judged, now, self._counted(entries, held), listed)
        for policy, message in judged.gave_up.items():
            self.gave_up[policy] = message
            log.warning("NodeMaintenancePolicy %s: %s", policy, message)
        return judged

    def _counted(self, entries: Mapping[str, list[dict[str, Any]]], held: Callable[[str], bool]) -> dict[tuple[str, str], float]:
        """The seconds counted since each entry's node was first seen given back; an entry whose node is held again
        (taken again, or its hand-back not done) starts anew when next seen given back."""
        at = asyncio.get_running_loop().time()
        back = {health.key(e) for listed in entries.values() for e in listed if not held(e["node"])}
        self.seen_back = {k: self.seen_back.get(k, at) for k in back}
        return {k: at - since for k, since in self.seen_back.items()}

    def _watch(self, wanted: bool) -> None:
        """Watch the workloads waitForHealthy judges while some policy waits for health, and only then."""
        if wanted and not self.mirrors:
            self.mirrors = {kind: Mirror(self.kube, path, functools.partial(self._changed, kind), slim=slim_workload)
                            for kind, path in HEALTH_PATHS.items()}
            self._tasks = [asyncio.create_task(m.run(), name=f"policy {kind} watch") for kind, m in self.mirrors.items()]
        elif not wanted and self.mirrors:
            for task in self._tasks:
                task.cancel()
            self.mirrors = {}

    def _changed(self, kind: str, key: str | None) -> None:
        """A workload a recovering node waits for changed: the recovering nodes are judged again. Any other changes nothing."""
        if key is not None and (kind, key) not in self.last.awaited:
            return
        self.on_change(key)

    async def stop(self) -> None:
        self._watch(False)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []


def slim_workload(obj: dict[str, Any]) -> dict[str, Any]:
    """What waitForHealthy reads of a budget, ReplicaSet or StatefulSet: its generations and counts."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    counts = ("observedGeneration", "currentHealthy", "expectedPods", "availableReplicas")
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "generation") if k in meta},
            "spec": {k: spec[k] for k in ("replicas",) if k in spec}, "status": {k: status[k] for k in counts if k in status}}

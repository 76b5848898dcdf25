"""A fleet: a NodeMaintenance for every node of the scale case (``scale.populate``), all created at once under
one NodeMaintenancePolicy, as a rolling maintenance of a large pool starts, to an operator started afresh.

The policy lets no node go (``maxParallel: 0``) while the NodeMaintenances are created, so that what the queue
alone costs the operator (memory, connections, requests) is measured apart from any drain; then it lets
``parallel`` go at once. As an admin would once a node's maintenance is done, the bench deletes each
NodeMaintenance as soon as it has Succeeded, which hands its node back and frees its slot for the next in
line. Meanwhile a watch of the fleet's nodes counts, at every change, how many are cordoned at once: never
more than the policy allows. Once the first nodes are drained, the operator is stopped and started again, and
timed until it evicts again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from devcluster.operator import OperatorProcess
from node_maintenance.api import GROUP, KIND, POLICY
from node_maintenance.api.paths import POLICY_VERSION, nm_path, node_path, policy_path
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.errors import NotFound, Silent
from node_maintenance.runtime import metrics

from . import drains
from .cluster import OPERATOR_USER, AuditCounter, BenchCluster
from .scale import FLEET_LABEL, Peaks, cpu_seconds, post_all, reconciling
from .spy import hottest, profiling
from .workload import SETUP_TIMEOUT_SECONDS, delete_all, pages, until

ROOT = Path(__file__).resolve().parents[1]
POLICY_CRD_FILE = ROOT / "bundle" / "manifests" / f"{GROUP}_{POLICY.plural}.yaml"
POLICY_NAME = "bench-fleet"
SELECTOR = f"{FLEET_LABEL[0]}={FLEET_LABEL[1]}"
# A fleet whose queue does not fill or move fails its part instead of holding up the bench.
FIRST_TIMEOUT_SECONDS = 600
# The restarted operator's first eviction is waited for longer: however long it takes is the figure (kopf's index of
# names once made it 7 minutes at 5,000), and a slow restart must be measured, not cut short.
RESTART_TIMEOUT_SECONDS = 1800
# Each window in which the operator's memory and connections are sampled before and with the queue.
WINDOW_SECONDS = 2
# The teardown waits for the fleet's NodeMaintenances to be gone three minutes and this long for each: 5,000 deleted at
# once outlasted three minutes.
TEARDOWN_SECONDS_PER_MAINTENANCE = 0.1
Seen = Callable[[str, dict[str, Any]], None]
# How the audit log stamps a request (UTC, to the microsecond).
STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"
# The operator's metrics of its policies' decisions, by family name (a counter's without its _total), in the order
# _per_change reads them.
DECISION_METRICS = tuple(family.name for counter in (metrics.POLICY_CHANGES, metrics.LINES_DECIDED, metrics.DECISION_SECONDS)
                         for family in counter.describe())


async def listed(api: AsyncKube, path: str, query: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    """Every object at ``path`` a page at a time (a thousand nodes are not one answer), and the listing's version."""
    items: list[dict[str, Any]] = []
    version = ""
    async for listing in pages(api, path, query):
        items += listing["items"]
        version = listing["metadata"]["resourceVersion"]
    return items, version


async def follow(api: AsyncKube, path: str, query: dict[str, str], seen: Seen) -> None:
    """Hand ``seen`` every object at ``path``: each listed one (as "LISTED"), then every change a watch brings
    (ADDED, MODIFIED, DELETED), resuming where the server ended a watch, or where one fell silent (a busy API server
    may send a quiet kind no bookmark for longer than a watch waits: the fleet's nodes while five thousand
    NodeMaintenances queue); until cancelled. Nothing is missed between the listing and the watch, nor between two watches."""
    items, version = await listed(api, path, query)
    for item in items:
        seen("LISTED", item)
    while True:
        with contextlib.suppress(Silent):
            async for event in api.watch(path, {**query, "resourceVersion": version, "allowWatchBookmarks": "true"}):
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    seen(event["type"], event["object"])


class Cordons:
    """The fleet's nodes as a watch shows them: how many are cordoned (spec.unschedulable) at once, at every
    change, and how many changes were seen, so that a check of the highest count cannot pass on no data; and
    when each was last uncordoned (handed back)."""

    def __init__(self) -> None:
        self.cordoned: set[str] = set()
        self.most = 0
        self.events = 0  # watch events, the listing not included
        self.cordons = 0  # nodes seen becoming cordoned
        self.cordoned_at: dict[str, float] = {}  # node -> when the watch first showed it cordoned (monotonic)
        self.uncordoned: dict[str, float] = {}  # node -> when the watch last showed it uncordoned (monotonic)

    def seen(self, kind: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        self.events += kind != "LISTED"
        if kind != "DELETED" and (node.get("spec") or {}).get("unschedulable"):
            self.cordons += name not in self.cordoned
            self.cordoned.add(name)
            self.cordoned_at.setdefault(name, time.monotonic())
        elif name in self.cordoned:
            self.cordoned.discard(name)
            self.uncordoned[name] = time.monotonic()
        self.most = max(self.most, len(self.cordoned))


class Queue:
    """The fleet's NodeMaintenances as a watch shows them: each one's phase, and when each Succeeded; each that
    has Succeeded is deleted at once (its node handed back, its slot freed)."""

    def __init__(self, api: AsyncKube) -> None:
        self.api = api
        self.phases: dict[str, str] = {}
        self.succeeded: dict[str, float] = {}  # name -> when the watch showed it Succeeded (monotonic)
        self.deleting: set[asyncio.Task[None]] = set()

    def seen(self, kind: str, maintenance: dict[str, Any]) -> None:
        name = maintenance["metadata"]["name"]
        if kind == "DELETED":
            self.phases.pop(name, None)
            return
        self.phases[name] = phase = (maintenance.get("status") or {}).get("phase", "")
        if phase == "Succeeded" and name not in self.succeeded:
            self.succeeded[name] = time.monotonic()
            task = asyncio.get_running_loop().create_task(self._delete(name))
            self.deleting.add(task)
            task.add_done_callback(self.deleting.discard)

    def waiting(self) -> int:
        return sum(phase == "Pending" for phase in self.phases.values())

    async def _delete(self, name: str) -> None:
        try:
            await self.api.request("DELETE", nm_path(name))
        except NotFound:
            pass


def _maintenance(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": KIND, "metadata": {"name": name, "labels": dict([FLEET_LABEL])},
            "spec": {"nodeName": node, "reason": "benchmark fleet"}}


def _policy(parallel: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{POLICY_VERSION}", "kind": POLICY.kind, "metadata": {"name": POLICY_NAME},
            "spec": {"nodeSelector": {"matchLabels": dict([FLEET_LABEL])}, "maxParallel": parallel}}


async def _policy_status(api: AsyncKube) -> dict[str, Any]:
    return (await api.request("GET", policy_path(POLICY_NAME))).get("status") or {}


async def _give_back(api: AsyncKube, names: list[str]) -> None:
    """Delete the NodeMaintenances of ``names`` and wait until they are gone and their nodes handed back."""
    wanted = set(names)
    for maintenance in (await api.request("GET", nm_path()))["items"]:
        if maintenance["spec"]["nodeName"] in wanted:
            await api.request("DELETE", nm_path(maintenance["metadata"]["name"]))

    async def handed_back() -> bool:
        left = [m for m in (await api.request("GET", nm_path()))["items"] if m["spec"]["nodeName"] in wanted]
        nodes, _ = await listed(api, node_path(), {"labelSelector": SELECTOR})
        return not left and not any(n["spec"].get("unschedulable") for n in nodes if n["metadata"]["name"] in wanted)

    await until(handed_back, f"nodes {sorted(wanted)[:3]} handed back", 300)


class Fleet:
    """One fleet on ``names`` (those still carrying their pods first: the queue takes them in this order), measured
    until ``first`` NodeMaintenances have Succeeded."""

    def __init__(self, cluster: BenchCluster, api: AsyncKube, operator: OperatorProcess, names: list[str], parallel: int, first: int,
                 stacks: Path | None = None) -> None:
        self.cluster, self.api, self.operator, self.parallel, self.first = cluster, api, operator, parallel, first
        # py-spy samples the operator into it while the first nodes are drained, and beside it (-restart) from its restart
        # until its first eviction
        self.stacks = stacks
        # One node is drained alone first; its pods gone, it then waits at the end of the queue.
        self.alone, self.order = names[0], names[1:] + names[:1]
        self.cordons, self.queue = Cordons(), Queue(api)
        self.audit = AuditCounter(cluster.audit_log)
        self.watches: list[asyncio.Task[None]] = []
        self.single = 0.0  # seconds one node of the fleet takes alone
        self.result: dict[str, Any] = {"nodes": len(names), "max_parallel": parallel, "first": first}
        self.maintenances = {f"{POLICY_NAME}-{i:04d}": node for i, node in enumerate(self.order)}  # name -> its node, in line order

    async def run(self) -> dict[str, Any]:
        """Measure; then delete the NodeMaintenances and the policy without waiting (nothing is measured after)."""
        self.cluster.kubectl("apply", "--server-side", "-f", str(POLICY_CRD_FILE))
        self.cluster.kubectl("wait", "--for=condition=Established", f"crd/{POLICY.crd_name}", "--timeout=60s")
        await _give_back(self.api, self.order)  # the nodes an earlier part drained
        # The single-node time of this node shape in this run, before the policy selects the node.
        self.single = await drains.with_operator(self.api, [self.alone])
        self.result["single_node_seconds"] = round(self.single, 2)
        await _give_back(self.api, [self.alone])
        await self.kubectl_wave()
        await self.api.request("POST", policy_path(), body=_policy(0))
        await until(lambda: _in_force(self.api), "the fleet's policy in force", 120)
        # What the queue costs is measured from a fresh process: what the earlier parts left in its heap (the allocator
        # keeps what a burst took) would hide part of it.
        await asyncio.to_thread(self.operator.stop)
        await asyncio.to_thread(self.operator.start)
        await until(reconciling(self.operator), "the operator started afresh reconciling", 120, interval=0.1)
        self.watches = [asyncio.create_task(follow(self.api, node_path(), {"labelSelector": SELECTOR}, self.cordons.seen),
                                            name="the watch of the fleet's nodes"),
                        asyncio.create_task(follow(self.api, nm_path(), {"labelSelector": SELECTOR}, self.queue.seen),
                                            name="the watch of the fleet's NodeMaintenances")]
        try:
            async with Peaks(self.operator) as before:
                await asyncio.sleep(WINDOW_SECONDS)
            self.audit.mark()
            decided = await self.decisions()
            async with Peaks(self.operator, 0.2) as whole:
                queued = await self.queue_all(before)
                await self.drain_first()
            self.result["decisions"] = _per_change(decided, await self.decisions())
            await self.restart()
            await asyncio.gather(*self.queue.deleting)
            told = await self.events()
            ended = _stamp(datetime.datetime.now(datetime.UTC))  # the waits end here, before every NodeMaintenance is deleted
        finally:
            for watch in self.watches:
                watch.cancel()
            await asyncio.gather(*self.watches, return_exceptions=True)
            await self.clean_up()
        self.result["rss_mib"] = {**self.result["rss_mib"], "peak": whole.rss_mib}
        self.result["connections"] = {**self.result["connections"], "peak": whole.connections}
        self.count_requests(queued, told, ended)
        self.result["cordoned"] = {"most": self.cordons.most, "events": self.cordons.events, "cordons": self.cordons.cordons}
        return self.result

    async def clean_up(self) -> None:
        """The fleet's NodeMaintenances and its policy deleted, and how long the NodeMaintenances took to be gone: each
        one's finalizer is the operator's to remove, so a fleet deleted at once is the operator's work, in proportion to
        its size (5,000 outlasted a fixed three minutes)."""
        started = time.monotonic()
        await delete_all(self.api, nm_path(), "the fleet's NodeMaintenances", {"labelSelector": SELECTOR},
                         seconds=SETUP_TIMEOUT_SECONDS + TEARDOWN_SECONDS_PER_MAINTENANCE * len(self.order))
        self.result["teardown_seconds"] = round(time.monotonic() - started, 2)
        await self.api.request("DELETE", policy_path(POLICY_NAME))

    async def decisions(self) -> dict[str, float]:
        """The policies' decisions so far, as the operator's /metrics counts them: the changes heard, the lines decided
        and the CPU seconds they took."""
        text = await asyncio.to_thread(self.operator.metrics)
        counts = dict.fromkeys(DECISION_METRICS, 0.0)
        for family in text_string_to_metric_families(text):
            if family.name in DECISION_METRICS:
                counts[family.name] += sum(sample.value for sample in family.samples if sample.name.endswith("_total"))
        return counts

    async def kubectl_wave(self) -> None:
        """The reference of the first wave: ``parallel`` `kubectl drain`s at once, one a node, on as many nodes of the
        fleet at the end of its line (drained then, they are reached after the nodes timed): how fast this control
        plane lets that many drains of this node shape go at once."""
        nodes = self.order[-self.parallel - 1:-1]
        seconds = await drains.many_with_kubectl(self.cluster, self.cluster.kubectl_drain_kubeconfig(), nodes)
        self.result["kubectl_wave_seconds"] = round(seconds, 2)
        self.cluster.kubectl("uncordon", *nodes)

    async def queue_all(self, before: Peaks) -> Counter[str]:
        """Every NodeMaintenance created at once while the policy lets none go: what the queue alone costs the
        operator, in memory and connections (against ``before``) and requests (returned)."""
        started = time.monotonic()
        async with Peaks(self.operator, 0.2) as queueing:
            await post_all(self.api, [(nm_path(), _maintenance(name, node)) for name, node in self.maintenances.items()])
            self.result["create_seconds"] = round(time.monotonic() - started, 2)

            async def all_queued() -> bool:
                self.alive()
                return self.queue.waiting() == len(self.order) and (await _policy_status(self.api)).get("queued") == len(self.order)

            await until(all_queued, f"{len(self.order)} NodeMaintenances queued", FIRST_TIMEOUT_SECONDS)
            self.result["queued_after_seconds"] = round(time.monotonic() - started, 2)
        async with Peaks(self.operator) as queued:
            await asyncio.sleep(WINDOW_SECONDS)
        self.result["rss_mib"] = {"before": before.rss_mib, "queueing_peak": queueing.rss_mib, "queued": queued.rss_mib}
        self.result["memory_per_queued_kib"] = round((queued.rss_bytes - before.rss_bytes) / len(self.order) / 1024, 2)
        self.result["connections"] = {"before": before.connections, "queueing_peak": queueing.connections, "queued": queued.connections}
        self.result["connections_added_by_queue"] = max(queueing.connections, queued.connections) - before.connections
        return self.audit.since_mark(OPERATOR_USER)

    async def drain_first(self) -> None:
        """Let ``parallel`` go at once, and time them until ``first`` have Succeeded, against ``first / parallel`` times
        one node alone (what the queue adds to the drains themselves, were the control plane as fast for ``parallel``
        nodes as for one); and the first ``parallel`` against as many `kubectl drain`s at once."""
        released = time.monotonic()
        await self.api.patch(policy_path(POLICY_NAME), {"spec": {"maxParallel": self.parallel}})

        async def first_done() -> bool:
            self.alive()
            return len(self.queue.succeeded) >= self.first

        assert self.operator.process is not None
        with profiling(self.operator.process.pid, self.stacks):
            await until(first_done, f"{self.first} NodeMaintenances Succeeded", FIRST_TIMEOUT_SECONDS, interval=0.1)
        done = sorted(self.queue.succeeded.values())
        seconds, wave = done[self.first - 1] - released, done[self.parallel - 1] - released
        ideal = self.first / self.parallel * self.single
        self.result.update(first_seconds=round(seconds, 2), ideal_seconds=round(ideal, 2), first_vs_ideal=round(seconds / ideal, 2),
                           first_wave_seconds=round(wave, 2), first_wave_vs_kubectl=round(wave / self.result["kubectl_wave_seconds"], 2),
                           **self.split(released))

    async def restart(self) -> None:
        """The operator stopped and started again in the middle of the fleet, its slots draining and the rest of the
        line waiting (an upgrade, its pod moved): how soon after its start it evicts again, and its memory meanwhile."""
        audit = AuditCounter(self.cluster.audit_log)
        audit.mark()
        await asyncio.to_thread(self.operator.stop)
        started = datetime.datetime.now(datetime.UTC)
        await asyncio.to_thread(self.operator.start)  # returns once it answers its readiness probe
        ready = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

        async def evicted() -> bool:
            self.alive()
            return any(at >= _stamp(started) for _pod, at in audit.on_objects(OPERATOR_USER, "pods", verbs=("create",)))

        assert self.operator.process is not None
        pid = self.operator.process.pid
        stacks = self.stacks.with_name(f"{self.stacks.stem}-restart.txt") if self.stacks else None
        async with Peaks(self.operator, 0.2) as after:
            with profiling(pid, stacks):
                await until(evicted, "an eviction after the operator's restart", RESTART_TIMEOUT_SECONDS, interval=1)
            cpu = cpu_seconds(pid)  # the new process's, from its start
            await asyncio.sleep(WINDOW_SECONDS)
        first = min(at for _pod, at in audit.on_objects(OPERATOR_USER, "pods", verbs=("create",)) if at >= _stamp(started))
        self.result["restart"] = {"ready_seconds": round(ready, 2), "first_eviction_seconds": round(
            (datetime.datetime.strptime(first, STAMP).replace(tzinfo=datetime.UTC) - started).total_seconds(), 2), "rss_mib": after.rss_mib,
                                  "cpu_seconds_until_evicting": round(cpu, 2)}
        if stacks:
            self.result["restart"]["profile"] = {"stacks": stacks.name, "hottest": hottest(stacks)}

    def split(self, released: float) -> dict[str, Any]:
        """Where the first nodes' time went, from the watch of the fleet's nodes: when the first wave was cordoned; the
        median time a node was held (cordoned until handed back: the drain, its Succeeded, the bench's deletion and the
        handback); and the median time a slot stood empty (the k-th node cordoned after the first wave takes the slot
        of the k-th node handed back)."""
        cordoned, uncordoned = self.cordons.cordoned_at, self.cordons.uncordoned
        taken = sorted(t for t in cordoned.values() if t >= released)
        handed_back = [node for node in uncordoned if node in cordoned and uncordoned[node] >= cordoned[node]]
        back = sorted(uncordoned[node] for node in handed_back)
        held = [uncordoned[node] - cordoned[node] for node in handed_back]
        empty = [take - free for take, free in zip(taken[self.parallel:], back, strict=False)]
        return {"first_wave_cordoned_seconds": round(taken[self.parallel - 1] - released, 2) if len(taken) >= self.parallel else None,
                "held_median_seconds": _median(held), "slot_empty_median_seconds": _median(empty), "slot_empty_p99_seconds": _p99(empty)}

    async def events(self) -> dict[str, list[str]]:
        """When each event the operator posted on a NodeMaintenance of the fleet happened, by NodeMaintenance: its
        eventTime (to the microsecond, as the audit log stamps requests) or else its first time (to the second, padded to
        the second's end: within a wait only if the whole second is); an event the recorder aggregated counts as often as
        its count says."""
        told: dict[str, list[str]] = {}
        async for listing in pages(self.api, "/api/v1/events", {"fieldSelector": f"involvedObject.kind={KIND}"}):
            for event in listing.get("items") or []:
                at = event.get("eventTime") or (event.get("firstTimestamp") or "")[:19] + ".999999Z"
                told.setdefault(event["involvedObject"]["name"], []).extend([at] * int(event.get("count") or 1))
        return told

    def count_requests(self, queueing: Counter[str], told: dict[str, list[str]], ended: str) -> None:
        """The operator's requests while queueing, per NodeMaintenance; each one's requests (on the object, and its
        events) over its whole wait, from its creation until the operator took its node (its first patch of the node,
        as the audit log stamps it) or the fleet's measures ended (``ended``, before the teardown deletes them all),
        whatever the line's length then; its events over the fleet; until then, over the whole fleet, per node drained, in all,
        beside the evictions, and beside the evictions and every wait in line (what the drains cost, the queue's own
        requests counted apart: a thousand waits shared among a hundred drained nodes are no drain's cost); and the
        teardown's, per NodeMaintenance it deleted from the line."""
        # The fleet's own requests end where its measures do: the teardown's deletion of every NodeMaintenance left in
        # line is counted apart, per NodeMaintenance deleted (the waits end there too).
        requests, drained = self.audit.since_mark(OPERATOR_USER, before=ended), len(self.queue.succeeded)
        leaving = self.audit.since_mark(OPERATOR_USER, after=ended)
        taken: dict[str, str] = {}  # node -> when the operator first patched it
        for node, at in self.audit.on_objects(OPERATOR_USER, "nodes", verbs=("patch",)):
            taken.setdefault(node, at)
        ends = {name: min(taken.get(node, ended), ended) for name, node in self.maintenances.items()}
        waited = dict.fromkeys(self.maintenances, 0)
        for name, at in self.audit.on_objects(OPERATOR_USER, "nodemaintenances"):
            if name in waited:
                waited[name] += at < ends[name]
        for name, times in told.items():
            if name in waited:
                waited[name] += sum(at < ends[name] for at in times)
        beyond = sum(v for k, v in _drain_counts(requests).items() if not k.startswith("create pods/eviction"))
        self.result["drained"] = drained
        self.result["requests"] = {
            "queueing_per_maintenance": round(_total(queueing) / len(self.order), 2),
            "queueing_by_request": {k: round(v / len(self.order), 2) for k, v in sorted(_drain_counts(queueing).items())},
            "whole_wait": {"median": _median([float(v) for v in waited.values()]), "max": max(waited.values()),
                           "taken": sum(node in taken and taken[node] < ended for node in self.maintenances.values())},
            "per_node": {k: round(v / drained, 2) for k, v in sorted(_drain_counts(requests).items())},
            "per_node_total": round(_total(requests) / drained, 2),
            "per_node_beyond_evictions": round(beyond / drained, 2),
            "per_node_beyond_evictions_and_waits": round((beyond - sum(waited.values())) / drained, 2),
            "leases_per_node": round(sum(v for k, v in requests.items() if "leases" in k) / drained, 2),
            "teardown_per_maintenance_left": round(_total(leaving) / max(1, len(self.order) - drained), 2),
            "teardown_by_request": {k: round(v / max(1, len(self.order) - drained), 2) for k, v in sorted(_drain_counts(leaving).items())}}
        self.result["events_per_maintenance"] = {"median": _median([float(len(told.get(n, []))) for n in self.maintenances]),
                                                 "max": max(len(told.get(n, [])) for n in self.maintenances)}

    def alive(self) -> None:
        """Raise what ended a watch: a fleet measured without it would wait in vain, or pass on no data."""
        for watch in self.watches:
            if watch.done():
                watch.result()
                raise RuntimeError(f"{watch.get_name()} ended")


async def _in_force(api: AsyncKube) -> bool:
    """A policy holds back new maintenances once the operator has read it: its status says so."""
    return (await _policy_status(api)).get("observedGeneration") == 1


def _per_change(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """What each change cost the policies' decisions while the fleet queued and its first nodes drained."""
    changes, lines, cpu = (after[name] - before[name] for name in DECISION_METRICS)
    return {"changes": int(changes), "lines_decided": int(lines), "cpu_seconds": round(cpu, 3),
            "cpu_ms_per_change": round(1000 * cpu / changes, 3) if changes else None,
            "cpu_ms_per_line": round(1000 * cpu / lines, 3) if lines else None}


def _drain_counts(counts: Counter[str]) -> Counter[str]:
    """Requests but the Lease renewals (the leader's, whatever it drains), as ``api_cost`` counts them."""
    return Counter({k: v for k, v in counts.items() if "leases" not in k})


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _stamp(at: datetime.datetime) -> str:
    """``at`` as the audit log stamps a request: comparable with its stamps as text."""
    return at.strftime(STAMP)


def _p99(values: list[float]) -> float | None:
    """The nearest-rank 99th percentile."""
    return round(sorted(values)[math.ceil(0.99 * len(values)) - 1], 2) if values else None


def _total(counts: Counter[str]) -> int:
    return sum(_drain_counts(counts).values())

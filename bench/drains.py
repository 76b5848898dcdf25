"""One drain each way, timed from the request to the drained node, and the budgets' own pace."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from devcluster.cluster import Cluster
from node_maintenance.api import GROUP, KIND
from node_maintenance.api.paths import nm_path, node_path, pod_path
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.errors import KubeError, NotFound, TooManyRequests

from .workload import SETTLE_SECONDS, until

POLL_SECONDS = 0.1


async def with_kubectl(cluster: Cluster, kubeconfig: Path, node: str) -> float:
    """Seconds `kubectl drain` takes. A child process of the event loop, not a thread: twenty at once are not
    queued behind the default executor's few threads."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        str(cluster.bin["kubectl"]), f"--kubeconfig={kubeconfig}", "drain", node, "--ignore-daemonsets",
        "--delete-emptydir-data", "--force", "--timeout=900s", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, stderr = await process.communicate()
    elapsed = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"bench: kubectl drain {node} failed:\n{stderr.decode(errors='replace')[-2000:]}")
    return elapsed


async def many_with_kubectl(cluster: Cluster, kubeconfig: Path, nodes: list[str]) -> float:
    """Seconds until every one of as many `kubectl drain`s at once, one a node, has ended."""
    started = time.monotonic()
    await asyncio.gather(*(with_kubectl(cluster, kubeconfig, node) for node in nodes))
    return time.monotonic() - started


async def with_operator(api: AsyncKube, nodes: list[str]) -> float:
    """Create one NodeMaintenance per node at once; seconds until every one is Succeeded."""
    started = time.monotonic()
    await asyncio.gather(*(api.request("POST", nm_path(), body={
        "apiVersion": f"{GROUP}/v1beta1", "kind": KIND, "metadata": {"name": node},
        "spec": {"nodeName": node, "reason": "benchmark"}}) for node in nodes))
    waiting = set(nodes)
    while waiting:
        await asyncio.sleep(POLL_SECONDS)
        for obj in (await api.request("GET", nm_path()))["items"]:
            if (obj.get("status") or {}).get("phase") == "Succeeded":
                waiting.discard(obj["metadata"]["name"])
        if time.monotonic() - started > 900:
            raise SystemExit(f"bench: NodeMaintenances {sorted(waiting)[:3]} not Succeeded after 900s")
    return time.monotonic() - started


async def budget_wave(api: AsyncKube, namespace: str, node: str, budgets: int, samples: int = 3) -> float:
    """Median seconds from evicting one pod under a `maxUnavailable: 1` budget until it allows the next
    eviction (its replacement Ready and counted): one wave of a drain. One pod under each of ``budgets``
    budgets goes at once, so the controllers keep the pace they keep during a drain."""
    waves = []
    for _ in range(samples):
        pods = (await api.request("GET", f"/api/v1/namespaces/{namespace}/pods", query={"fieldSelector": f"spec.nodeName={node}"}))["items"]
        victims: dict[str, str] = {}
        for pod in pods:
            app = (pod["metadata"].get("labels") or {}).get("app", "")
            if app.startswith("web-") and not pod["metadata"].get("deletionTimestamp"):
                victims.setdefault(app, pod["metadata"]["name"])
        started = time.monotonic()
        await asyncio.gather(*(api.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body={
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}})
            for name in victims.values()))
        waiting = set(victims)
        while waiting:
            await asyncio.sleep(0.05)
            for budget in (await api.request("GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"))["items"]:
                status, name = budget.get("status") or {}, budget["metadata"]["name"]
                if name in waiting and status.get("disruptionsAllowed") == 1 and not status.get("disruptedPods"):
                    waiting.discard(name)
                    waves.append(time.monotonic() - started)
    assert len(victims) == budgets, f"expected {budgets} budgets, evicted under {sorted(victims)}"
    return statistics.median(waves)


BUDGETS_PATH = "/apis/policy/v1/poddisruptionbudgets"
# How long an eviction waits for its budget's watch to show room before it is sent anyway: the watch may have shown
# the room before the refusal that made it wait was read.
RECHECK_SECONDS = 5.0


class _Budgets:
    """Every PodDisruptionBudget's ``disruptionsAllowed`` as a watch of them all shows it, less the evictions sent
    since: an eviction waits here until its budget has room, and is sent the moment the watch shows it."""

    def __init__(self) -> None:
        self.allowed: dict[tuple[str, str], int] = {}
        self.changed = asyncio.Condition()
        self.listed = asyncio.Event()

    async def follow(self, api: AsyncKube) -> None:
        """List, then watch until the server ends the watch or it fails; again, until cancelled."""
        while True:
            with contextlib.suppress(KubeError):
                listing = await api.request("GET", BUDGETS_PATH)
                await self._note(listing["items"])
                self.listed.set()
                async for event in api.watch(BUDGETS_PATH, {"resourceVersion": listing["metadata"]["resourceVersion"]}):
                    await self._note([event["object"]])
            await asyncio.sleep(POLL_SECONDS)

    async def _note(self, budgets: list[dict[str, Any]]) -> None:
        async with self.changed:
            for budget in budgets:
                meta = budget["metadata"]
                self.allowed[meta["namespace"], meta["name"]] = (budget.get("status") or {}).get("disruptionsAllowed", 0)
            self.changed.notify_all()

    async def take(self, budget: tuple[str, str]) -> None:
        """Wait until ``budget`` has room (at most RECHECK_SECONDS), and count one eviction against it."""
        async with self.changed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RECHECK_SECONDS):
                    await self.changed.wait_for(lambda: self.allowed[budget] > 0)
            self.allowed[budget] -= 1


def _budget_of(pod: dict[str, Any]) -> tuple[str, str]:
    """The budget that would cover ``pod``: the workload names each budget after its pods' ``app`` label."""
    return pod["metadata"]["namespace"], (pod["metadata"].get("labels") or {}).get("app", "")


async def _evict(api: AsyncKube, budgets: _Budgets, pod: dict[str, Any]) -> None:
    """Evict ``pod`` as soon as its budget has room, again after each refusal; a pod of no budget goes at once."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    budget = _budget_of(pod)
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    while True:
        if budget in budgets.allowed:
            await budgets.take(budget)
        try:
            await api.request("POST", pod_path(namespace, name) + "/eviction", body=body)
            return
        except NotFound:
            return
        except TooManyRequests as refused:
            if not refused.by_budget:
                await asyncio.sleep(refused.retry_after or POLL_SECONDS)


async def _as_budgets_allow(api: AsyncKube, budgets: _Budgets, node: str) -> None:
    """``node`` cordoned, as every drain does first, and every pod a drain removes from it evicted: the pods of a
    budget one after another, each as soon as the budget has room, and the pods of no budget at once; done when they
    are gone."""
    await api.patch(node_path(node), {"spec": {"unschedulable": True}})
    query = {"fieldSelector": f"spec.nodeName={node}"}
    pods = [p for p in (await api.request("GET", "/api/v1/pods", query=query))["items"]
            if not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or [])]
    in_turn: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        budget = _budget_of(pod)
        in_turn[budget if budget in budgets.allowed else ("", pod["metadata"]["name"])].append(pod)

    async def one_after_another(group: list[dict[str, Any]]) -> None:
        for pod in group:
            await _evict(api, budgets, pod)

    await asyncio.gather(*(one_after_another(group) for group in in_turn.values()))
    evicted = {p["metadata"]["uid"] for p in pods}

    async def gone() -> bool:
        return not evicted & {p["metadata"]["uid"] for p in (await api.request("GET", "/api/v1/pods", query=query))["items"]}

    await until(gone, f"the pods evicted from {node} gone", SETTLE_SECONDS, POLL_SECONDS)


async def as_budgets_allow(api: AsyncKube, nodes: list[str]) -> float:
    """Seconds until every pod a drain removes from ``nodes`` is gone, evicted as fast as each budget allows: all the
    nodes at once, each eviction sent the moment a watch of the budgets shows room for it. No drain of these nodes can
    end sooner: it is the pace the control plane sets, the budget-recovery limit of many nodes at once."""
    budgets = _Budgets()
    following = asyncio.create_task(budgets.follow(api))
    try:
        await budgets.listed.wait()
        started = time.monotonic()
        await asyncio.gather(*(_as_budgets_allow(api, budgets, node) for node in nodes))
        return time.monotonic() - started
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following

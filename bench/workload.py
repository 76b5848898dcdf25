"""The measured workload: per node, Deployments of 10 under `maxUnavailable: 1` budgets, a StatefulSet,
bare pods and a DaemonSet pod, all pinned to the node and its spare (where replacements land)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from devcluster.cluster import Cluster
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.errors import Conflict, ServerError, Unreachable

IMAGE = "registry.invalid/app:1"
# Setting up many nodes at once queues hundreds of requests for the client's connections, while the
# controllers load the API server: a setup request may wait longer than the client's default.
SETUP_TIMEOUT_SECONDS = 180
# How long a node's workload may take to be Running with its budgets settled (twenty nodes set up at once
# on a busy machine took longer than five minutes).
SETTLE_SECONDS = 900


@dataclass(frozen=True)
class Shape:
    """How many pods of each kind one node carries."""

    deployments: int = 10
    replicas: int = 10
    statefulset: int = 5
    bare: int = 5
    grace: int = 1

    @property
    def drained(self) -> int:
        """Pods a drain removes (the DaemonSet pod stays)."""
        return self.deployments * self.replicas + self.statefulset + self.bare

    @classmethod
    def of_size(cls, pods: int, grace: int = 1) -> Shape:
        """About ``pods`` pods a node, in the same proportions: Deployments of 10 make up the bulk."""
        small = min(5, pods // 22)
        deployments = (pods - 2 * small) // 10
        return cls(deployments=deployments, statefulset=small, bare=pods - 10 * deployments - small, grace=grace)


def _affinity(pool: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": pool}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _template(labels: dict[str, str], pool: list[str], grace: int) -> dict[str, Any]:
    return {"metadata": {"labels": labels},
            "spec": {"terminationGracePeriodSeconds": grace, "affinity": _affinity(pool), "containers": [{"name": "c", "image": IMAGE}]}}


def objects(namespace: str, node: str, spare: str, shape: Shape) -> list[dict[str, Any]]:
    pool = [node, spare]
    items: list[dict[str, Any]] = []
    for i in range(shape.deployments):
        labels = {"app": f"web-{i}"}
        items.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"web-{i}", "namespace": namespace},
                      "spec": {"replicas": shape.replicas, "selector": {"matchLabels": labels}, "template": _template(labels, pool, shape.grace)}})
        items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": f"web-{i}", "namespace": namespace},
                      "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}})
    if shape.statefulset:
        labels = {"app": "db"}
        items.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": namespace},
                      "spec": {"serviceName": "db", "replicas": shape.statefulset, "podManagementPolicy": "Parallel",
                               "selector": {"matchLabels": labels}, "template": _template(labels, pool, shape.grace)}})
    labels = {"app": "agent"}
    items.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": namespace},
                  "spec": {"selector": {"matchLabels": labels}, "template": _template(labels, [node], shape.grace)}})
    for i in range(shape.bare):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"bare-{i}", "namespace": namespace},
                      "spec": {"nodeName": node, "terminationGracePeriodSeconds": shape.grace, "containers": [{"name": "c", "image": IMAGE}]}})
    return items


_PATHS = {"Deployment": "/apis/apps/v1/namespaces/{ns}/deployments", "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
          "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets", "Pod": "/api/v1/namespaces/{ns}/pods",
          "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"}


async def create_all(api: AsyncKube, items: list[dict[str, Any]], concurrency: int = 32) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def create(item: dict[str, Any]) -> None:
        async with slots:
            try:
                await api.request("POST", _PATHS[item["kind"]].format(ns=item["metadata"]["namespace"]), body=item,
                                  timeout=SETUP_TIMEOUT_SECONDS)
            except Conflict:
                pass  # already there

    await asyncio.gather(*(create(item) for item in items))


async def node_pair(cluster: Cluster, api: AsyncKube, tag: str, shape: Shape) -> tuple[str, str]:
    """A node carrying the workload, every pod Running and every budget settled, and its spare (schedulable)."""
    node, spare, namespace = f"{tag}", f"{tag}-spare", tag
    await asyncio.to_thread(cluster.create_kwok_node, node)
    await asyncio.to_thread(cluster.create_kwok_node, spare, unschedulable=True)
    await api.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await wait_nodes_ready(api, [node, spare])
    await until(lambda: has_service_account(api, namespace), f"the default ServiceAccount of {namespace}", 120)
    await create_all(api, objects(namespace, node, spare, shape))
    await until(lambda: settled(api, namespace, shape.drained + 1, node), f"the workload on {node} running", SETTLE_SECONDS)
    await api.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": None}})
    return node, spare


async def settled(api: AsyncKube, namespace: str, running: int, node: str | None = None) -> bool:
    """Whether exactly ``running`` pods of ``namespace`` are Running (on ``node``, if named; a pod still
    terminating counts too) and every budget allows an eviction: a drain measured from here waits on nothing
    left over from before."""
    pods = (await api.request("GET", f"/api/v1/namespaces/{namespace}/pods"))["items"]
    up = sum(p["status"].get("phase") == "Running" and node in (None, p["spec"].get("nodeName")) for p in pods)
    budgets = (await api.request("GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"))["items"]
    return up == running and all((b.get("status") or {}).get("disruptionsAllowed") == 1 for b in budgets)


async def has_service_account(api: AsyncKube, namespace: str) -> bool:
    """Pods of a new namespace are refused until its controller has made the default ServiceAccount."""
    return await api.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default") is not None


async def wait_nodes_ready(api: AsyncKube, names: list[str]) -> None:
    """One listing a look, a page at a time, however many nodes (a GET each made the scale setup wait on itself). KWOK
    readies a few thousand nodes in a busy cluster in minutes, not seconds: the wait grows with their number, and so
    does the time between looks (each lists them all)."""
    wanted = set(names)

    async def ready() -> bool:
        up: set[str] = set()
        async for listing in pages(api, "/api/v1/nodes", {}):
            up |= {n["metadata"]["name"] for n in listing["items"]
                   if any(c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or [])}
        return wanted <= up

    await until(ready, f"{len(names)} nodes Ready", 120 + 0.06 * len(names), interval=0.5 + len(names) / 2000)


async def until(check: Any, what: str, seconds: float, interval: float = 0.5) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out after {seconds:.0f}s waiting for {what}")
        await asyncio.sleep(interval)


async def delete_all(api: AsyncKube, path: str, what: str, query: dict[str, str], *, seconds: float = SETUP_TIMEOUT_SECONDS) -> None:
    """Every object at ``path`` that ``query`` selects deleted in one request, and waited for until gone, ``seconds`` at
    most. Deleting thousands may outlast the API server's request timeout (a 504, or the connection closed) while it
    goes on deleting them, and objects with finalizers stay until those are removed."""
    with contextlib.suppress(ServerError, Unreachable):
        await api.request("DELETE", path, query=query, timeout=SETUP_TIMEOUT_SECONDS)
    listing = {key: value for key, value in query.items() if key == "labelSelector"}

    async def gone() -> bool:
        return not (await api.request("GET", path, query={**listing, "limit": "1"}))["items"]

    await until(gone, f"{what} deleted", seconds)


async def pages(api: AsyncKube, path: str, query: dict[str, str], limit: int = 500) -> AsyncIterator[dict[str, Any]]:
    """Each page of a listing at ``path`` (a thousand nodes, or a namespace of thousands of pods, are not one answer)."""
    page = {**query, "limit": str(limit)}
    while True:
        listing = await api.request("GET", path, query=page)
        yield listing
        if not listing["metadata"].get("continue"):
            return
        page = {**query, "limit": str(limit), "continue": listing["metadata"]["continue"]}

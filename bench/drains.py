"""One drain each way, timed from the request to the drained node, and the budgets' own pace."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
from pathlib import Path

from devcluster.cluster import Cluster
from node_maintenance.api import GROUP, KIND
from node_maintenance.api.paths import nm_path
from node_maintenance.client.async_http import AsyncKube

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

"""The operator among many nodes and pods, and its conversion webhook under load."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import ssl
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

from devcluster.cluster import KWOK_SELECTOR, Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.api import GROUP, KIND
from node_maintenance.api.paths import nm_path
from node_maintenance.client.errors import Conflict
from node_maintenance.client.http import AsyncKube

from . import drains
from .workload import SETUP_TIMEOUT_SECONDS, has_service_account, until, wait_nodes_ready

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def usage(operator: OperatorProcess, seconds: float) -> dict[str, float]:
    """Resident memory (peak of the samples) and CPU share of one core over ``seconds``."""
    pid = operator.process.pid
    before, started, peak = cpu_seconds(pid), time.monotonic(), 0
    while time.monotonic() - started < seconds:
        peak = max(peak, operator.rss_bytes())
        await asyncio.sleep(0.5)
    return {"rss_mib": round(peak / 2**20, 1), "cpu_percent": round(100 * (cpu_seconds(pid) - before) / (time.monotonic() - started), 1)}


def _node(name: str) -> dict[str, Any]:
    key, value = KWOK_SELECTOR
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok"}}}


def _pod(name: str, namespace: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "registry.invalid/app:1"}]}}


async def _post_all(api: AsyncKube, path_and_bodies: list[tuple[str, dict[str, Any]]], concurrency: int = 48) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def post(path: str, body: dict[str, Any]) -> None:
        async with slots:
            try:
                await api.request("POST", path, body=body, timeout=SETUP_TIMEOUT_SECONDS)
            except Conflict:
                pass

    await asyncio.gather(*(post(p, b) for p, b in path_and_bodies))


async def _all_running(api: AsyncKube, namespace: str) -> bool:
    """Whether no pod of ``namespace`` is outside Running (paging, so a large namespace costs little)."""
    query = {"fieldSelector": "status.phase!=Running", "limit": "500"}
    while True:
        listing = await api.request("GET", f"/api/v1/namespaces/{namespace}/pods", query=query)
        if listing["items"]:
            return False
        if not listing["metadata"].get("continue"):
            return True
        query = {**query, "continue": listing["metadata"]["continue"]}


async def many_nodes(cluster: Cluster, api: AsyncKube, operator: OperatorProcess, nodes: int, pods: int, draining: int,
                     idle_seconds: float) -> dict[str, Any]:
    names = [f"scale-{i:04d}" for i in range(nodes)]
    result: dict[str, Any] = {"nodes": nodes, "pods": pods}
    result["idle_before_pods"] = await usage(operator, idle_seconds)
    started = time.monotonic()
    await _post_all(api, [("/api/v1/nodes", _node(n)) for n in names])
    await wait_nodes_ready(api, names)
    await api.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scale"}})
    await until(lambda: has_service_account(api, "scale"), "the default ServiceAccount of scale", 120)
    await _post_all(api, [("/api/v1/namespaces/scale/pods", _pod(f"p{i}", "scale", names[i % nodes])) for i in range(pods)])

    await until(lambda: _all_running(api, "scale"), f"{pods} pods Running", 1200, interval=2)
    result["setup_seconds"] = round(time.monotonic() - started, 1)
    result["idle"] = await usage(operator, idle_seconds)
    result["idle_growth_mib"] = round(result["idle"]["rss_mib"] - result["idle_before_pods"]["rss_mib"], 1)
    drain = asyncio.create_task(drains.with_operator(api, names[:draining]))
    result["draining"] = await usage(operator, 3)
    while not drain.done():
        sample = await usage(operator, 2)
        result["draining"] = {k: max(v, sample[k]) for k, v in result["draining"].items()}
    result["drain_seconds"] = round(await drain, 2)
    operator.stop()
    spawned = time.monotonic()
    operator.start()  # returns once /readyz answers
    result["start_to_ready_seconds"] = round(time.monotonic() - spawned, 2)
    await until(_reconciling(operator), "the restarted operator reconciling", 120, interval=0.1)
    result["start_to_reconciling_seconds"] = round(time.monotonic() - spawned, 2)
    # The same cluster idle for an operator that has run nothing else: what the process itself holds,
    # against ``idle``, which also holds what the earlier parts (many nodes at once) left allocated.
    result["idle_fresh_start"] = await usage(operator, idle_seconds)
    return result


def _reconciling(operator: OperatorProcess) -> Any:
    async def check() -> bool:
        return operator.logs().count("reconciling NodeMaintenances") >= operator.starts
    return check


def _review(count: int) -> dict[str, Any]:
    objects = [{"apiVersion": f"{GROUP}/v1alpha1", "kind": KIND,
                "metadata": {"name": f"nm-{i}", "uid": f"uid-{i}", "annotations": {
                    "conversion.nodemaintenance.kubevirt.io/v1beta1-fields": json.dumps({"spec": {"drain": {"timeoutSeconds": 600}}})}},
                "spec": {"nodeName": f"node-{i}", "reason": "benchmark"},
                "status": {"phase": "Succeeded", "totalpods": 30, "evictionPods": 29, "pendingPods": [], "lastError": ""}}
               for i in range(count)]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "bench", "desiredAPIVersion": f"{GROUP}/v1beta1", "objects": objects}}


async def conversion(cluster: Cluster, api: AsyncKube, webhook: OperatorProcess, stored: int) -> dict[str, Any]:
    """ConversionReviews sent straight to the webhook, then `kubectl get` of many objects through v1alpha1."""
    context = ssl.create_default_context(cadata=webhook.ca_pem.decode())
    result: dict[str, Any] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        for size, repeats in ((1, 300), (100, 200), (500, 200)):  # a p99 needs 100 samples at least
            body = json.dumps(_review(size))
            latencies = []
            for _ in range(5):  # warm-up: connection, TLS session, first-call costs
                async with session.post(webhook.webhook_url + "/convert", data=body, headers={"Content-Type": "application/json"}) as response:
                    await response.read()
            cpu = cpu_seconds(webhook.process.pid)
            gc.disable()  # this client's own collector pauses are not the webhook's latency (they added ~20 ms to a p99)
            try:
                for _ in range(repeats):
                    started = time.perf_counter()
                    async with session.post(webhook.webhook_url + "/convert", data=body, headers={"Content-Type": "application/json"}) as response:
                        answer = await response.json()
                    latencies.append(1000 * (time.perf_counter() - started))
                    assert answer["response"]["result"]["status"] == "Success", answer["response"]["result"]
            finally:
                gc.enable()
            latencies.sort()
            # CPU per review: the webhook's own cost, which other load on the machine does not stretch as it does latency.
            result[f"review_{size}"] = {"p50_ms": round(statistics.median(latencies), 2),
                                        "p99_ms": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 2),
                                        "cpu_ms": round(1000 * (cpu_seconds(webhook.process.pid) - cpu) / repeats, 2)}
    await _post_all(api, [(nm_path(), {"apiVersion": f"{GROUP}/v1beta1", "kind": KIND, "metadata": {"name": f"conv-{i:04d}"},
                                       "spec": {"nodeName": f"conv-{i:04d}", "reason": "benchmark"}}) for i in range(stored)])
    times = []
    for _ in range(3):
        started = time.monotonic()
        out = await asyncio.to_thread(subprocess.run, [str(cluster.bin["kubectl"]), f"--kubeconfig={cluster.kubeconfig}", "get",
                                                       f"nodemaintenances.v1alpha1.{GROUP}", "-o", "name"], capture_output=True, text=True)
        times.append(time.monotonic() - started)
        assert out.stdout.count("\n") >= stored, out.stderr[-500:]
    result["kubectl_get_v1alpha1"] = {"objects": stored, "median_seconds": round(statistics.median(times), 2)}
    cluster.kubectl("delete", f"nodemaintenances.v1beta1.{GROUP}", "--all", "--wait=false")
    return result

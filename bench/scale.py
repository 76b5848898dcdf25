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
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.errors import Conflict

from . import drains
from .workload import SETUP_TIMEOUT_SECONDS, delete_all, has_service_account, pages, until, wait_nodes_ready

TICKS = os.sysconf("SC_CLK_TCK")
# What the scale case's nodes carry, and the fleet's policy selects.
FLEET_LABEL = ("node-maintenance-bench/fleet", "true")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def connections(pid: int) -> int:
    """Established TCP connections of process ``pid``: the entries of its network namespace's TCP tables whose
    socket is one of its file descriptors."""
    sockets = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            sockets.add(target[len("socket:["):-1])
    rows = [line.split() for table in ("tcp", "tcp6") for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]]
    return sum(1 for fields in rows if fields[3] == "01" and fields[9] in sockets)  # "st" 01 is ESTABLISHED; field 9 the inode


class Peaks:
    """While in use (``async with``), the operator's resident memory and open connections, sampled every
    ``interval`` seconds (once more on leaving): their highest values."""

    def __init__(self, operator: OperatorProcess, interval: float = 0.5) -> None:
        self.operator, self.interval = operator, interval
        self.rss_bytes = self.connections = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        assert self.operator.process is not None
        self.rss_bytes = max(self.rss_bytes, self.operator.rss_bytes())
        self.connections = max(self.connections, connections(self.operator.process.pid))

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> Peaks:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self.sample()

    @property
    def rss_mib(self) -> float:
        return round(self.rss_bytes / 2**20, 1)


async def usage(operator: OperatorProcess, seconds: float) -> dict[str, float]:
    """Resident memory (peak of the samples) and CPU share of one core over ``seconds``."""
    assert operator.process is not None
    pid = operator.process.pid
    before, started = cpu_seconds(pid), time.monotonic()
    async with Peaks(operator) as peaks:
        await asyncio.sleep(seconds)
    return {"rss_mib": peaks.rss_mib, "cpu_percent": round(100 * (cpu_seconds(pid) - before) / (time.monotonic() - started), 1)}


def node_names(count: int) -> list[str]:
    return [f"scale-{i:04d}" for i in range(count)]


def _node(name: str) -> dict[str, Any]:
    key, value = KWOK_SELECTOR
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok", FLEET_LABEL[0]: FLEET_LABEL[1]}}}


def _pod(name: str, namespace: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "registry.invalid/app:1"}]}}


async def post_all(api: AsyncKube, path_and_bodies: list[tuple[str, dict[str, Any]]], concurrency: int = 48) -> None:
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
    async for listing in pages(api, f"/api/v1/namespaces/{namespace}/pods", {"fieldSelector": "status.phase!=Running"}):
        if listing["items"]:
            return False
    return True


async def populate(api: AsyncKube, names: list[str], pods: int) -> None:
    """The nodes ``names`` (of the fleet) and ``pods`` bare pods spread evenly over them, every pod Running. Nodes and
    the namespace that exist already are kept; the pods of an earlier population are deleted first (a fleet's drains
    removed some, and the rest are spread over the nodes it had)."""
    await post_all(api, [("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scale"}})])
    await delete_all(api, "/api/v1/namespaces/scale/pods", "the pods of scale", {"gracePeriodSeconds": "0"})
    await post_all(api, [("/api/v1/nodes", _node(n)) for n in names])
    await wait_nodes_ready(api, names)
    await until(lambda: has_service_account(api, "scale"), "the default ServiceAccount of scale", 120)
    await post_all(api, [("/api/v1/namespaces/scale/pods", _pod(f"p{i}", "scale", names[i % len(names)])) for i in range(pods)])
    await until(lambda: _all_running(api, "scale"), f"{pods} pods Running", 1200, interval=2)


async def many_nodes(cluster: Cluster, api: AsyncKube, operator: OperatorProcess, names: list[str], pods: int, draining: int,
                     idle_seconds: float) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": len(names), "pods": pods}
    result["idle_before_pods"] = await usage(operator, idle_seconds)
    started = time.monotonic()
    await populate(api, names, pods)
    result["setup_seconds"] = round(time.monotonic() - started, 1)
    result["idle"] = await usage(operator, idle_seconds)
    result["idle_growth_mib"] = round(result["idle"]["rss_mib"] - result["idle_before_pods"]["rss_mib"], 1)
    # The last nodes: the fleet, on these nodes next, drains the first ones first, which still carry their pods.
    drain = asyncio.create_task(drains.with_operator(api, names[-draining:]))
    result["draining"] = await usage(operator, 3)
    while not drain.done():
        sample = await usage(operator, 2)
        result["draining"] = {k: max(v, sample[k]) for k, v in result["draining"].items()}
    result["drain_seconds"] = round(await drain, 2)
    operator.stop()
    spawned = time.monotonic()
    operator.start()  # returns once /readyz answers
    result["start_to_ready_seconds"] = round(time.monotonic() - spawned, 2)
    await until(reconciling(operator), "the restarted operator reconciling", 120, interval=0.1)
    result["start_to_reconciling_seconds"] = round(time.monotonic() - spawned, 2)
    # The same cluster idle for an operator that has run nothing else: what the process itself holds,
    # against ``idle``, which also holds what the earlier parts (many nodes at once) left allocated.
    result["idle_fresh_start"] = await usage(operator, idle_seconds)
    return result


def reconciling(operator: OperatorProcess) -> Any:
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
    assert webhook.ca_pem is not None and webhook.process is not None
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
    await post_all(api, [(nm_path(), {"apiVersion": f"{GROUP}/v1beta1", "kind": KIND, "metadata": {"name": f"conv-{i:04d}"},
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

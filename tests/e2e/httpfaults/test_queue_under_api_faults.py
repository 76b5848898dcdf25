"""A queue of five maintenances under `maxParallel: 1` and drain rules, while the API server errs: every read
of the policies and of CRDs answers 503 for 20 s, then 429 for 20 s (the Lease stays renewable), the API
server restarts, and the budget watch's connection goes silent, neither sending nor closing. The operator
holds: never more than one node of the pool cordoned, no protected pod evicted, and every maintenance
finishes."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.httpproxies import FaultProxy
from devcluster.operator import USER, OperatorProcess
from node_maintenance.api.paths import BUDGETS, CRDS, policy_path

from ..helpers import NM, NMP, apply, create_nm, eventually, existing, get, install_policy_crd, nm_status, pod

pytestmark = pytest.mark.e2e

ERROR_SECONDS = 20
SAMPLE_SECONDS = 0.2
# The operator notices a silent watch after this long (client.async_http.WATCH_INACTIVITY_SECONDS), with room to spare.
SILENCE_NOTICED_SECONDS = 150


def policy_or_crd_read(method: str, path: str, _query: Mapping[str, str]) -> bool:
    return method == "GET" and (path.startswith(CRDS) or path.startswith(policy_path()))


def budget_watch(method: str, path: str, query: Mapping[str, str]) -> bool:
    return method == "GET" and path == BUDGETS and query.get("watch") == "true"


class CordonSampler:
    """How many nodes of the pool are cordoned, sampled every SAMPLE_SECONDS (a failed read is counted, not fatal:
    the API server restarts meanwhile)."""

    def __init__(self, cluster: Cluster, selector: str) -> None:
        from kubernetes import client

        self._nodes = client.CoreV1Api(cluster.api_client())
        self.selector = selector
        self.samples, self.failed, self.most = 0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CordonSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            try:
                listing = self._nodes.list_node(label_selector=self.selector, _request_timeout=5)
            except Exception:
                self.failed += 1
                continue
            self.samples += 1
            self.most = max(self.most, sum(bool(n.spec and n.spec.unschedulable) for n in listing.items))


@pytest.fixture
def pool(cluster: Cluster, nodes: Any, faulted_operator: OperatorProcess) -> Iterator[tuple[str, list[str]]]:
    """Five nodes under a policy: one at a time, cache pods skipped, batch pods waited for."""
    install_policy_crd(cluster)
    label = uuid.uuid4().hex[:8]
    workers = nodes(5, labels={"e2e-queue": label})
    name = f"queue-{label}"
    apply(cluster, {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenancePolicy", "metadata": {"name": name},
                    "spec": {"nodeSelector": {"matchLabels": {"e2e-queue": label}}, "maxParallel": 1, "drainRules": [
                        {"podSelector": {"matchLabels": {"tier": "cache"}}, "behavior": "Skip"},
                        {"podSelector": {"matchLabels": {"tier": "batch"}}, "behavior": "WaitCompleted"}]}})
    eventually(lambda: ((get(cluster, NMP, name) or {}).get("status") or {}).get("observedGeneration") == 1, "the policy in force")
    yield f"e2e-queue={label}", workers
    cluster.kubectl("delete", NMP, name, "--ignore-not-found", "--wait=false")


def _queued_reason(cluster: Cluster, name: str) -> str:
    return next((c.get("reason", "") for c in nm_status(cluster, name).get("conditions") or [] if c["type"] == "Queued"), "")


def test_the_queue_holds_under_error_answers_a_restart_and_a_silent_watch(
        cluster: Cluster, namespace: str, fault_proxy: FaultProxy, faulted_operator: OperatorProcess, pool: tuple[str, list[str]]) -> None:
    selector, workers = pool
    for worker in workers:
        apply(cluster, pod(f"web-{worker}", namespace, worker, labels={"tier": "web"}),
              pod(f"cache-{worker}", namespace, worker, labels={"tier": "cache"}),
              pod(f"batch-{worker}", namespace, worker, labels={"tier": "batch"}, spec={"restartPolicy": "Never"}))
    eventually(lambda: sum(p["status"].get("phase") == "Running" for p in existing(cluster, "pods", "-n", namespace)["items"]) == 15,
               "15 pods running")
    protected = {p["metadata"]["name"]: p["metadata"]["uid"] for p in existing(cluster, "pods", "-n", namespace)["items"]
                 if p["metadata"]["labels"]["tier"] in ("cache", "batch")}
    names = [f"queue-{i}-{worker}" for i, worker in enumerate(workers)]
    offset = len(faulted_operator.logs())
    waited_for_policies: set[str] = set()
    silenced_at = 0.0
    with CordonSampler(cluster, selector) as sampler:
        for name, worker in zip(names, workers, strict=True):
            create_nm(cluster, name, worker)
        for index, (name, worker) in enumerate(zip(names, workers, strict=True)):
            # The batch pod is waited for, never evicted: it completes once only it is left.
            eventually(lambda: nm_status(cluster, name).get("pendingPods") == [f"batch-{worker}"], f"{name} waiting for its batch pod", timeout=120)
            batch = get(cluster, "pod", f"batch-{worker}", "-n", namespace)
            assert batch is not None and batch["metadata"]["uid"] == protected[f"batch-{worker}"] and not batch["metadata"].get("deletionTimestamp")
            cluster.kubectl("patch", "pod", f"batch-{worker}", "-n", namespace, "--subresource=status", "--type=merge",
                            "-p", '{"status":{"phase":"Succeeded"}}')
            eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", f"{name} Succeeded", timeout=60)
            # Faults begin before the slot is freed: the next in line is admitted, or not, under them.
            if index == 0:
                fault_proxy.silence(budget_watch)
                silenced_at = time.monotonic()
                fault_proxy.answer_with(503, ERROR_SECONDS, policy_or_crd_read)
            if index == 1:
                fault_proxy.answer_with(429, ERROR_SECONDS, policy_or_crd_read)
            if index == 2:
                cluster.restart("kube-apiserver")
            cluster.kubectl("delete", NM, name, "--wait=false")

            def handed_back() -> bool:
                # While reads fail, the next in line waits and says why (and the hand-back waits for the policies too).
                if index in (0, 1) and _queued_reason(cluster, names[index + 1]) == "WaitingForPolicies":
                    waited_for_policies.add(names[index + 1])
                return get(cluster, NM, name) is None

            eventually(handed_back, f"{name} handed back", timeout=120, interval=0.5)
    # The faults happened.
    assert fault_proxy.injected[503] > 0 and fault_proxy.injected[429] > 0, fault_proxy.injected
    assert fault_proxy.silenced >= 1, "no budget watch was under way to silence"
    eventually(lambda: "watch of /apis/policy/v1/poddisruptionbudgets failed" in faulted_operator.logs()[offset:],
               "the operator noticing the silent budget watch", timeout=max(1.0, SILENCE_NOTICED_SECONDS - (time.monotonic() - silenced_at)))
    assert sampler.samples > 100, (sampler.samples, sampler.failed)
    # The operator held: one node at a time, the next in line waiting while the policies could not be read.
    assert sampler.most == 1, f"{sampler.most} nodes of the pool were cordoned at once under maxParallel: 1"
    assert waited_for_policies == {names[1], names[2]}, waited_for_policies
    # No protected pod was evicted or deleted: the cache pods are still there, the batch pods went only once completed.
    for name, uid in protected.items():
        if name.startswith("cache-"):
            kept = get(cluster, "pod", name, "-n", namespace)
            removals = "; ".join(f"{e['user']['username']} {e['verb']} {e['objectRef'].get('subresource') or ''} at {e['stageTimestamp']} "
                                 f"({e.get('userAgent', '')}, {e.get('responseStatus', {}).get('code')})" for e in cluster.audit_events()
                                 if e["objectRef"].get("name") == name and e["verb"] in ("create", "delete")
                                 and e["objectRef"].get("subresource") != "status")
            assert kept is not None and kept["metadata"]["uid"] == uid and not kept["metadata"].get("deletionTimestamp"), f"{name}: {removals}"
    evictions = [e["objectRef"]["name"] for e in cluster.audit_events(USER)
                 if e["objectRef"].get("namespace") == namespace and e["verb"] in ("create", "delete")
                 and e["objectRef"].get("subresource") in ("eviction", None) and e["objectRef"]["name"].startswith("cache-")]
    assert evictions == [], f"the operator tried to remove pods a Skip rule protects: {evictions}"

"""The operator drains the node it runs on.

A rolling maintenance of every node reaches the node the operator runs on. Here the operator runs from its image
as its bundle installs it (two replicas, their budget, priority class and tolerations) on a cluster with two real
nodes, and a policy with ``maxParallel: 1`` rolls both real nodes and a pool of KWOK nodes while the test plays the
admin: each node that is drained is given back. When the leader's own node is drained it is evicted like any pod,
another replica takes the lead and the evicted one comes back on a node still in service; the fleet finishes with
never more than one node out at a time (sampled every 200 ms), no maintenance lost or started again, every node
given back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any, Self

import pytest

from devcluster.cluster import Cluster
from devcluster.processes import identify, survivors
from devcluster.publish import publish_operator
from devcluster.realnode import CGROUPS, PAUSE_TAG
from node_maintenance.drain.nodes import TAINT
from node_maintenance.runtime.leader import LEASE_NAME
from node_maintenance_packaging.clusterserviceversion import DEPLOYMENT, NAMESPACE

from ...releases import HEAD
from ..helpers import KWOK_TOLERATION, NM, NMP, CordonWatch, apply, eventually, get, our_taint, pdb
from ..realnode.bundle_install import install

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]  # the cluster's start and the image's build count too

POOL = {"e2e-pool": "self-drain"}
KWOK_NODES = 4
WORKLOADS = "shop"
SAMPLE_SECONDS = 0.2


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(real_node=True, real_nodes=2) as running:
        processes, cgroups = identify(running.pids()), [node.cgroup for node in running.nodes]
        yield running
    assert not survivors(processes), "the cluster's processes outlived it"
    assert not [h for h in CGROUPS.iterdir() for cgroup in cgroups if (h / cgroup).exists()], "a real node's cgroups outlived it"


class Sampler:
    """Every ``SAMPLE_SECONDS`` while the ``with`` block runs: the pool's nodes in maintenance (cordoned, or tainted by
    the operator) and the holder of the operator's leader Lease. Keeps the most nodes out at once, the holders in the
    order they led, and how many samples were taken; an error of a sample fails the block."""

    def __init__(self, cluster: Cluster) -> None:
        from kubernetes import client

        api = cluster.api_client()
        self.list_nodes = client.CoreV1Api(api).list_node
        self.read_lease = client.CoordinationV1Api(api).read_namespaced_lease
        self.selector = ",".join(f"{k}={v}" for k, v in POOL.items())
        self.samples = 0
        self.seconds = 0.0
        self.most: tuple[int, frozenset[str]] = (0, frozenset())
        self.leaders: list[str] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._started = time.monotonic()
        self._thread.start()
        eventually(lambda: self.samples > 0 or self.error, "the first sample of the pool")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.seconds = time.monotonic() - self._started
        assert not self._thread.is_alive(), "the sampler did not stop"
        if self.error is not None and exc[0] is None:
            raise AssertionError(f"a sample failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            while not self._stop.wait(SAMPLE_SECONDS):
                nodes = self.list_nodes(label_selector=self.selector, _request_timeout=10).items
                out = frozenset(str(n.metadata.name) for n in nodes if n.metadata is not None and _in_maintenance(n))
                spec = self.read_lease(LEASE_NAME, NAMESPACE, _request_timeout=10).spec
                holder = spec.holder_identity if spec is not None else None
                if holder and holder not in self.leaders[-1:]:
                    self.leaders.append(holder)
                self.samples += 1
                if len(out) > self.most[0]:
                    self.most = (len(out), out)
        except BaseException as error:  # handed to the test by __exit__
            self.error = error


def _in_maintenance(node: Any) -> bool:
    """Cordoned or tainted by the operator: what a policy's maxParallel counts."""
    return bool(node.spec.unschedulable) or any(t.key == TAINT["key"] for t in node.spec.taints or [])


def _operator_pods(cluster: Cluster) -> list[dict[str, Any]]:
    listing = get(cluster, "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={DEPLOYMENT}")
    return [p for p in (listing or {"items": []})["items"] if not p["metadata"].get("deletionTimestamp")]


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _leader(cluster: Cluster) -> str | None:
    lease = get(cluster, "lease", "-n", NAMESPACE, LEASE_NAME)
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or None


def _workloads(cluster: Cluster, registry: str, real: list[str], kwok: list[str]) -> None:
    """Real pods on the real nodes (a Deployment whose budget lets one go at a time), simulated ones on the pool."""
    cluster.kubectl("create", "namespace", WORKLOADS)

    def spread(name: str, nodes: list[str], replicas: int, image: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
        labels = {"app": name}
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": WORKLOADS},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                    "terminationGracePeriodSeconds": 1, "affinity": affinity, "tolerations": tolerations,
                    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                   "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": labels}}],
                    "containers": [{"name": "c", "image": image}]}}}}

    apply(cluster,
          spread("web", real, 2, f"{registry}/{PAUSE_TAG}", []),
          pdb("web", WORKLOADS, {"app": "web"}, maxUnavailable=1),
          spread("batch", kwok, 2 * len(kwok), "registry.invalid/batch:1", [KWOK_TOLERATION]))

    def running() -> bool:
        listing = get(cluster, "pods", "-n", WORKLOADS)
        return listing is not None and sum(_ready(p) for p in listing["items"]) == 2 + 2 * len(kwok)

    eventually(running, "the workloads running", timeout=120)


def test_the_operator_drains_its_own_node_comes_back_on_the_other_and_the_fleet_finishes(cluster: Cluster) -> None:
    assert cluster.registry is not None
    real = [node.name for node in cluster.nodes]
    kwok = [f"selfdrain-kwok-{i}" for i in range(KWOK_NODES)]
    for name in kwok:
        cluster.create_kwok_node(name, labels=POOL)
    cluster.kubectl("label", "node", *real, *(f"{k}={v}" for k, v in POOL.items()))

    published = publish_operator(cluster.registry.host)
    install(cluster, published.inputs(), HEAD, NAMESPACE)
    pods = eventually(lambda: len(ready := [p for p in _operator_pods(cluster) if _ready(p)]) == 2 and ready,
                      "both replicas of the operator Ready", timeout=300)
    assert {p["spec"]["nodeName"] for p in pods} == set(real), "the two replicas run on different nodes"
    assert all(p["spec"].get("priorityClassName") == "system-cluster-critical" for p in pods)
    leader = eventually(lambda: _leader(cluster), "a replica leading")
    leader_node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["name"] == leader)
    _workloads(cluster, cluster.registry.host, real, kwok)

    apply(cluster, {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenancePolicy",
                    "metadata": {"name": "roll"}, "spec": {"nodeSelector": {"matchLabels": POOL}, "maxParallel": 1}})
    eventually(lambda: ((get(cluster, NMP, "roll") or {}).get("status") or {}).get("observedGeneration") == 1, "the policy in force")

    def maintain(node: str) -> None:
        apply(cluster, {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenance",
                        "metadata": {"name": f"roll-{node}"}, "spec": {"nodeName": node, "reason": "rolling maintenance"}})

    started: dict[str, str] = {}  # each maintenance's drainStartTime, which must never change
    finished: list[str] = []
    with Sampler(cluster) as sampler, CordonWatch(cluster, POOL) as cordons:
        # The leader's own node first: the operator takes the node it runs on while it is the one working.
        maintain(leader_node)
        eventually(lambda: our_taint(get(cluster, "node", leader_node) or {"spec": {}}), f"the leader's node {leader_node} taken", timeout=120)
        for node in [n for n in real if n != leader_node] + kwok:
            maintain(node)
        deadline = time.monotonic() + 600
        while len(finished) < len(real) + len(kwok):
            assert time.monotonic() < deadline, f"the fleet did not finish in 600 s: finished {finished}"
            for obj in (get(cluster, NM) or {"items": []})["items"]:
                name, status = obj["metadata"]["name"], obj.get("status") or {}
                if status.get("drainStartTime"):
                    assert started.setdefault(name, status["drainStartTime"]) == status["drainStartTime"], f"{name} was started again"
                if status.get("phase") == "Succeeded" and not obj["metadata"].get("deletionTimestamp"):
                    cluster.kubectl("delete", NM, name, "--timeout=120s")  # the admin's work is done: give the node back
                    finished.append(name)
                assert status.get("phase") != "Failed", f"{name} failed: {status.get('lastError')}"
            time.sleep(1)

    assert sampler.most[0] <= 1, f"more nodes in maintenance at once than maxParallel allows: {sorted(sampler.most[1])}"
    assert cordons.most <= 1, f"the node watch saw {cordons.most} nodes cordoned at once"
    assert sampler.samples >= sampler.seconds, f"{sampler.samples} samples in {sampler.seconds:.0f} s: the sampler fell behind"
    assert finished[0] == f"roll-{leader_node}"
    assert sorted(finished) == sorted(f"roll-{n}" for n in real + kwok)
    for name in real + kwok:
        given_back = get(cluster, "node", name)
        assert given_back is not None and not given_back["spec"].get("unschedulable") and not our_taint(given_back), f"{name} was not given back"
    # The leader was evicted through the API like any pod, another replica took the lead, and two run again.
    evicted = [e for e in cluster.audit_events()
               if e.get("objectRef", {}).get("subresource") == "eviction" and e["objectRef"].get("name") == leader
               and e.get("responseStatus", {}).get("code") == 201]
    assert evicted and all(e["user"]["username"].startswith(f"system:serviceaccount:{NAMESPACE}:") for e in evicted), \
        f"the leader {leader} was not evicted by the operator: {json.dumps(evicted)[:500]}"
    assert leader not in {p["metadata"]["name"] for p in _operator_pods(cluster)}
    # The lead passed on from the evicted leader: to the standby, or to the evicted one's replacement, which the
    # ReplicaSet starts while the leader still stops and which may win the Lease it gives up.
    assert sampler.leaders[0] == leader and len(sampler.leaders) > 1, f"the lead never passed from the evicted leader: {sampler.leaders}"
    eventually(lambda: len([p for p in _operator_pods(cluster) if _ready(p)]) == 2, "both replicas Ready again", timeout=120)

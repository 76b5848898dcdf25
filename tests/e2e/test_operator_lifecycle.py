"""The operator survives what happens to clusters: missing or vanishing nodes, duplicate requests,
being killed at any point, running as two replicas (the leader's link frozen too), and clusters with many pods elsewhere."""

from __future__ import annotations

import re
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import USER as OPERATOR_USER
from devcluster.operator import OperatorProcess, point_conversion_at
from devcluster.toxiproxy import Proxy, Toxiproxy
from node_maintenance.api import CRD_NAME, GROUP
from node_maintenance.client.config import user_agent
from node_maintenance.runtime.leader import LEASE_NAME
from node_maintenance_packaging.clusterserviceversion import NAMESPACE
from soak.chaos import Api, Tally

from .faults.helpers import drain_with_fault, give_back
from .helpers import (
    CRD_FILE,
    NM,
    apply,
    crd_of_release,
    create_nm,
    delete_nm,
    deployment,
    eventually,
    existing,
    get,
    nm,
    nm_status,
    node,
    our_taint,
    pdb,
    pod,
    pods_on,
    replace_crd,
)

pytestmark = pytest.mark.e2e

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# How long the old leader's link stays frozen once the other replica holds the Lease.
FROZEN_AFTER_HANDOVER_SECONDS = 25


def _healthy(operator: OperatorProcess) -> bool:
    with urllib.request.urlopen(operator.health_url + "/healthz", timeout=2) as response:
        return bool(response.status == 200)


def _clean(node_obj: dict[str, Any]) -> bool:
    annotations = node_obj["metadata"].get("annotations") or {}
    return not node_obj["spec"].get("unschedulable") and not our_taint(node_obj) and not any(
        k.startswith("nodemaintenance.kubevirt.io/") for k in annotations
    )


def test_missing_node_fails_then_starts_when_the_node_appears(cluster: Cluster, operator: OperatorProcess) -> None:
    name = f"ghost-{int(time.time() * 1000) % 10**8}"
    create_nm(cluster, f"nm-{name}", name)
    status = eventually(lambda: (s := nm_status(cluster, f"nm-{name}")).get("phase") == "Failed" and s, "Failed for a missing node")
    assert f"node {name!r} not found" in status["lastError"]
    assert _healthy(operator)
    cluster.create_kwok_node(name)
    try:
        cluster.wait_node_ready(name)
        eventually(lambda: nm_status(cluster, f"nm-{name}").get("phase") == "Succeeded", "maintenance starts once the node exists", timeout=45)
        assert nm_status(cluster, f"nm-{name}")["lastError"] == ""
        delete_nm(cluster, f"nm-{name}")
        assert _clean(node(cluster, name))
    finally:
        cluster.kubectl("delete", "node", name, "--wait=false", "--ignore-not-found")


def test_second_maintenance_of_a_node_fails_and_never_uncordons_it(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    create_nm(cluster, "first-" + target, target)
    eventually(lambda: nm_status(cluster, "first-" + target).get("phase") == "Succeeded", "first maintenance Succeeded")
    create_nm(cluster, "second-" + target, target)
    status = eventually(lambda: (s := nm_status(cluster, "second-" + target)).get("phase") == "Failed" and s, "second maintenance Failed")
    assert f"already in maintenance by NodeMaintenance first-{target}" in status["lastError"]
    delete_nm(cluster, "second-" + target)
    held = node(cluster, target)
    assert held["spec"]["unschedulable"] is True and our_taint(held), "deleting the duplicate released the node"
    assert nm_status(cluster, "first-" + target)["phase"] == "Succeeded"
    delete_nm(cluster, "first-" + target)
    assert _clean(node(cluster, target))
    assert _healthy(operator)


def test_node_deleted_mid_maintenance(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    labels = {"app": "pinned"}
    apply(cluster, pod("pinned", namespace, target, labels=labels), pdb("pinned", namespace, labels, minAvailable=1))
    eventually(lambda: (get(cluster, "pdb", "pinned", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 1, "PDB sees the pod")
    create_nm(cluster, "nm-" + target, target)
    eventually(lambda: nm_status(cluster, "nm-" + target).get("phase") == "Running", "maintenance Running")
    cluster.kubectl("delete", "node", target)
    status = eventually(lambda: (s := nm_status(cluster, "nm-" + target)).get("phase") == "Failed" and s, "Failed once the node is gone", timeout=45)
    assert "not found" in status["lastError"]
    delete_nm(cluster, "nm-" + target)
    assert nm(cluster, "nm-" + target) is None, "the finalizer was not removed"
    assert _healthy(operator)


def test_killed_at_any_point_the_drain_still_completes(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    """SIGKILL at five points of a drain; each run ends Succeeded and the delete leaves the node clean."""

    def cordoned(target: str) -> bool:
        return bool(node(cluster, target)["spec"].get("unschedulable"))

    def midway(target: str) -> bool:
        status = nm_status(cluster, "nm-" + target)
        return status.get("phase") == "Running" and 0 < status.get("drainProgress", 0) < 100

    def done(target: str) -> bool:
        return nm_status(cluster, "nm-" + target).get("phase") == "Succeeded"

    points = {"at create": lambda t: True, "after cordon": cordoned, "mid-eviction": midway, "after success": done, "before delete": done}
    for index, (point, reached) in enumerate(points.items()):
        target, spare = nodes(2)
        app = f"app{index}"
        cluster.kubectl("cordon", spare)
        apply(cluster, deployment(app, namespace, [target, spare], 4, {"app": app}), pdb(app, namespace, {"app": app}, maxUnavailable=1))
        eventually(lambda: len(pods_on(cluster, target)) == 4 and all(p["status"].get("phase") == "Running" for p in pods_on(cluster, target)), "4 pods running")
        eventually(lambda: (get(cluster, "pdb", app, "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 4, "PDB sees 4 healthy")
        if point != "mid-eviction":
            cluster.kubectl("uncordon", spare)
        # Mid-eviction: with no room for replacements the budget holds the drain after its first eviction.
        create_nm(cluster, "nm-" + target, target)
        eventually(lambda: reached(target), f"the drain reaches point {point!r}", timeout=60, interval=0.05)
        killed = time.monotonic()
        operator.kill()
        cluster.kubectl("uncordon", spare)
        if point == "before delete":  # deleted while the operator is down: cleaned up on start
            cluster.kubectl("delete", NM, "nm-" + target, "--wait=false")
        operator.start()
        # Shown in the test report: a kill inside an eviction the API server admitted leaves the pod counted as disrupted
        # (status.disruptedPods) without deleting it, which holds the budget until the disruption controller's two minutes pass.
        print(f"killed {point}: the budget at the restart: {existing(cluster, 'pdb', app, '-n', namespace)['status']}")
        if point == "before delete":
            eventually(lambda: nm(cluster, "nm-" + target) is None, "the deleted maintenance is finalized after restart")
        else:
            try:
                # A kill inside an eviction request can leave the pod in the PDB's disruptedPods without
                # deleting it; the disruption controller forgets such entries after two minutes.
                eventually(lambda: done(target), f"Succeeded after a kill {point}", timeout=200)
            except AssertionError as error:
                raise AssertionError(f"{error}\nstatus: {nm_status(cluster, 'nm-' + target)}\npods: {[(p['metadata']['name'], p['status'].get('phase'), p['metadata'].get('deletionTimestamp')) for p in pods_on(cluster, target)]}\nall: {[(p['metadata']['name'], p['spec'].get('nodeName'), p['status'].get('phase')) for p in existing(cluster, 'pods', '-n', namespace)['items']]}\npdb: {existing(cluster, 'pdb', app, '-n', namespace)['status']}\nnodes: {cluster.kubectl('get', 'nodes').stdout}") from None
            assert not pods_on(cluster, target), f"node not drained after a kill {point}"
            delete_nm(cluster, "nm-" + target)
        print(f"killed {point}: done {time.monotonic() - killed:.1f}s after the kill")
        assert _clean(node(cluster, target)), f"node not clean after a kill {point}"


def test_two_replicas_only_the_lease_holder_acts(cluster: Cluster, operator: OperatorProcess, operator_factory: Callable[..., OperatorProcess], nodes: Callable[..., list[str]]) -> None:
    second = operator_factory("replica-1")
    second.start()  # ready: it serves webhooks, but waits for the Lease
    (first_node,) = nodes(1)
    create_nm(cluster, "nm-" + first_node, first_node)
    eventually(lambda: nm_status(cluster, "nm-" + first_node).get("phase") == "Succeeded", "handled by the leader")
    assert "became leader" not in second.logs() and '"began maintenance"' not in second.logs()
    operator.stop()  # a clean stop releases the Lease
    eventually(lambda: "became leader" in second.logs(), "the second replica takes over", timeout=30)
    (second_node,) = nodes(1)
    create_nm(cluster, "nm-" + second_node, second_node)
    eventually(lambda: nm_status(cluster, "nm-" + second_node).get("phase") == "Succeeded", "handled by the new leader")
    assert "nm-" + second_node in second.logs()
    delete_nm(cluster, "nm-" + first_node)
    delete_nm(cluster, "nm-" + second_node)
    second.stop()
    operator.start()
    eventually(lambda: operator.logs().count("became leader") >= 2, "the session operator leads again", timeout=30)


@dataclass
class Replica:
    """An operator process with a link of its own to the API server, which can fail alone."""

    process: OperatorProcess
    link: Proxy

    @property
    def user_agent(self) -> str:
        return user_agent(self.process.identity)


@pytest.fixture
def linked_replicas(cluster: Cluster, operator: OperatorProcess, operator_factory: Callable[..., OperatorProcess],
                    toxiproxy: Toxiproxy) -> Iterator[tuple[Replica, Replica]]:
    """Two replicas, each reaching the API server through a Toxiproxy link of its own; the first leads. The session
    operator stands down meanwhile, and the first replica takes its webhook port and certificate (the CRD's conversion)."""
    links = [toxiproxy.proxy(f"apiserver-{identity}", urlsplit(cluster.server).netloc) for identity in ("replica-a", "replica-b")]
    first = operator_factory("replica-a", server=f"https://{links[0].listen}", cert_dir=operator.cert_dir, webhook_port=operator.webhook_port)
    second = operator_factory("replica-b", server=f"https://{links[1].listen}")
    operator.stop()  # a clean stop releases the Lease
    try:
        first.start()
        eventually(lambda: "became leader" in first.logs(), "the first replica leads", timeout=30)
        second.start()
        yield Replica(first, links[0]), Replica(second, links[1])
    finally:
        first.stop()
        second.stop()
        for link in links:
            link.delete()
        operator.start()


def _requests(cluster: Cluster, since: datetime) -> list[dict[str, Any]]:
    """The operator's requests the API server received since ``since``, one audit event each (its last stage)."""
    last = {e["auditID"]: e for e in cluster.audit_events(OPERATOR_USER, every_request=True)}
    return [e for e in last.values() if _received(e) >= since]


def _received(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"])


def _succeeded(event: dict[str, Any]) -> bool:
    code: int = event.get("responseStatus", {}).get("code", 0)
    return 200 <= code < 300


def _on_leader_lease(event: dict[str, Any]) -> bool:
    ref = event.get("objectRef", {})
    return (ref.get("resource"), ref.get("namespace"), ref.get("name")) == ("leases", NAMESPACE, LEASE_NAME)


def _what(event: dict[str, Any]) -> str:
    ref = event.get("objectRef", {})
    return f"{event['verb']} {ref.get('resource')}{'/' + ref['subresource'] if ref.get('subresource') else ''}"


def _lease_holder(cluster: Cluster) -> str | None:
    return ((get(cluster, "lease", LEASE_NAME, "-n", NAMESPACE) or {}).get("spec") or {}).get("holderIdentity")


def test_a_frozen_leader_writes_nothing_once_the_other_replica_leads(cluster: Cluster, admin: Api, namespace: str, run_id: str,
                                                                     tally: Tally, linked_replicas: tuple[Replica, Replica]) -> None:
    """The leader's link to the API server freezes in the middle of a drain, without a reset: every byte is dropped
    and the connections stay open. The other replica takes the Lease and finishes the drain; the audit log, where
    the replicas' User-Agents tell them apart, shows no write of the old leader once the new one holds the Lease."""
    old, new = linked_replicas
    started = datetime.now(UTC)
    window: dict[str, datetime] = {}

    def freeze_the_leader(go_on: Callable[[], None]) -> None:
        with old.link.frozen():
            window["frozen"] = datetime.now(UTC)
            eventually(lambda: _lease_holder(cluster) == new.process.identity, "the other replica holding the Lease", timeout=60, interval=0.5)
            go_on()  # the budgets free up: the drain goes on, under the new leader
            time.sleep(FROZEN_AFTER_HANDOVER_SECONDS)
            window["lifted"] = datetime.now(UTC)

    drain = drain_with_fault(cluster, admin, namespace, run_id, tally, freeze_the_leader)
    # The old leader is back as a standby (its requests reach the server again) while the new one gives the nodes
    # back: what it had sent into the frozen link had its chance to arrive late.
    eventually(lambda: any(e["userAgent"] == old.user_agent for e in _requests(cluster, window["lifted"])),
               "the old leader's requests reaching the API server again", timeout=60)
    give_back(admin, drain.workload, tally)
    assert tally.violations == [], tally.violations
    assert old.process.process and old.process.process.alive() and new.process.process and new.process.process.alive()
    requests = _requests(cluster, started)
    # Every request of the replicas names one of them.
    assert {e.get("userAgent") for e in requests} == {old.user_agent, new.user_agent}
    acquired = min(_received(e) for e in requests if e["userAgent"] == new.user_agent and e["verb"] in WRITES
                   and _on_leader_lease(e) and _succeeded(e))
    for replica in (old, new):
        after = Counter(_what(e) for e in requests if e["userAgent"] == replica.user_agent and _received(e) > acquired)
        print(f"{replica.user_agent} after the handover: {sum(after.values())} requests {dict(after)}")
    print(f"frozen {window['frozen']:%T.%f}, Lease taken {acquired:%T.%f} ({(acquired - window['frozen']).total_seconds():.1f} s later), "
          f"lifted {window['lifted']:%T.%f}; writes refused unsent: {old.process.logs().count('no longer leads')}")
    assert window["frozen"] < acquired < window["lifted"], (window, acquired)
    old_requests = [e for e in requests if e["userAgent"] == old.user_agent]
    # The fault happened: the old leader drained until the freeze, nothing of it reached the server while frozen, and it gave the lead up.
    assert any(e["verb"] in WRITES and not _on_leader_lease(e) and _received(e) < window["frozen"] for e in old_requests)
    while_frozen = [_what(e) for e in old_requests if window["frozen"] + timedelta(seconds=1) < _received(e) < window["lifted"]]
    assert not while_frozen, while_frozen
    assert "lost leadership" in old.process.logs() and "competing for it again" in old.process.logs()
    # No write of the old leader once the new one held the Lease, but attempts on the Lease that failed.
    late = [(_what(e), e.get("responseStatus", {}).get("code"), e["requestReceivedTimestamp"]) for e in old_requests
            if e["verb"] in WRITES and _received(e) > acquired and (_succeeded(e) or not _on_leader_lease(e))]
    assert not late, late
    # The drain finished under the new leader: it wrote the maintenances' status.
    assert any(e["userAgent"] == new.user_agent and _what(e) == "patch nodemaintenances/status" and _succeeded(e) and _received(e) > acquired
               for e in requests)


def test_many_pods_elsewhere_do_not_grow_the_operator(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    others = nodes(4)
    (target,) = nodes(1)
    before = operator.rss_bytes()
    items = [pod(f"p{i}", namespace, others[i % 4], spec={"terminationGracePeriodSeconds": 0}) for i in range(2000)]
    for start in range(0, 2000, 500):
        apply(cluster, *items[start : start + 500])
    apply(cluster, pod("local", namespace, target))
    create_nm(cluster, "nm-" + target, target)
    eventually(lambda: nm_status(cluster, "nm-" + target).get("phase") == "Succeeded", "the maintenance completes", timeout=90)
    status = nm_status(cluster, "nm-" + target)
    assert status["totalpods"] <= 1 and status["evictionPods"] <= 1
    growth = operator.rss_bytes() - before
    pod_reads = [
        e for e in cluster.audit_events(OPERATOR_USER)
        if e.get("objectRef", {}).get("resource") == "pods" and not e["objectRef"].get("subresource") and e["verb"] in ("list", "watch")
    ]
    assert pod_reads, "the operator read no pods at all"
    unscoped = [e["requestURI"] for e in pod_reads if not re.search(r"fieldSelector=spec\.nodeName%3D", e["requestURI"])]
    assert not unscoped, f"pods listed or watched beyond one node: {unscoped[:3]}"
    assert growth < 16 * 1024 * 1024, f"operator memory grew by {growth / 2**20:.1f} MiB"
    delete_nm(cluster, "nm-" + target)


def test_works_under_the_first_release_crd_and_switches_when_it_is_upgraded(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]], tmp_path: Path) -> None:
    """Under 0.1.0's CRD (v1alpha1 only) the operator drains in v1alpha1; once the CRD serves v1beta1 it
    restarts its reconciler in v1beta1 and migrates storage, without the process exiting."""
    assert operator.ca_pem is not None, "the operator serves a certificate of its own making"
    leftovers = existing(cluster, NM)["items"]
    assert not leftovers, f"other tests left NodeMaintenances behind: {[o['metadata']['name'] for o in leftovers]}"
    target, spare = nodes(2)
    cluster.kubectl("cordon", spare)
    apply(cluster, deployment("web", namespace, [target, spare], 3, {"app": "web"}), pdb("web", namespace, {"app": "web"}, maxUnavailable=1),
          pod("bare", namespace, target))
    eventually(lambda: sum(p["status"].get("phase") == "Running" for p in pods_on(cluster, target)) == 4, "4 pods running")
    eventually(lambda: (get(cluster, "pdb", "web", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 3, "PDB sees 3 healthy")
    cluster.kubectl("uncordon", spare)
    operator.stop()
    name, v1alpha1 = "nm-" + target, f"nodemaintenances.v1alpha1.{GROUP}"
    try:
        replace_crd(cluster, crd_of_release("0.1.0", tmp_path))
        operator.start()
        apply(cluster, {"apiVersion": f"{GROUP}/v1alpha1", "kind": "NodeMaintenance", "metadata": {"name": name},
                        "spec": {"nodeName": target, "reason": "under 0.1.0"}})
        status = eventually(lambda: ((get(cluster, v1alpha1, name) or {}).get("status") or {}).get("phase") == "Succeeded"
                            and existing(cluster, v1alpha1, name)["status"], "Succeeded through v1alpha1", timeout=90)
        assert status["evictionPods"] == 4 and status["totalpods"] == 4 and status.get("pendingPods", []) == []
        assert status["lastError"] == ""
        held = node(cluster, target)
        assert held["spec"]["unschedulable"] is True and our_taint(held)
        assert not pods_on(cluster, target)
        assert "reconciling NodeMaintenances" in operator.logs() and '"version": "v1alpha1"' in operator.logs()

        # The upgrade: OLM replaces the CRD with the current one, conversion pointed at the operator.
        starts = operator.starts
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
        point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
        eventually(lambda: existing(cluster, "crd", CRD_NAME)["status"]["storedVersions"] == ["v1beta1"], "storedVersions == [v1beta1]", timeout=60)
        assert operator.process is not None and operator.process.alive() and operator.starts == starts, "the operator restarted as a process"
        assert "restarting the reconciler" in operator.logs()
        assert nm_status(cluster, name)["phase"] == "Succeeded"
        delete_nm(cluster, name)  # handled in v1beta1 now: the node is given back
        assert _clean(node(cluster, target))
    finally:
        cluster.kubectl("delete", NM, name, "--ignore-not-found", "--timeout=60s")
        operator.stop()
        replace_crd(cluster, CRD_FILE)
        point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
        operator.start()

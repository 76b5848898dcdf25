"""The operator survives what happens to clusters: missing or vanishing nodes, duplicate requests,
being killed at any point, running as two replicas, and clusters with many pods elsewhere."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import CRD_NAME, point_conversion_at
from devcluster.operator import USER as OPERATOR_USER

from .conftest import CRD_FILE
from .helpers import NM, apply, create_nm, delete_nm, deployment, eventually, get, nm, nm_status, node, our_taint, pdb, pod, pods_on
from .test_storage_migration import GROUP, _crd_of_release, _replace_crd

pytestmark = pytest.mark.e2e


def _healthy(operator) -> bool:
    with urllib.request.urlopen(operator.health_url + "/healthz", timeout=2) as response:
        return response.status == 200


def _clean(node_obj: dict) -> bool:
    annotations = node_obj["metadata"].get("annotations") or {}
    return not node_obj["spec"].get("unschedulable") and not our_taint(node_obj) and not any(
        k.startswith("nodemaintenance.kubevirt.io/") for k in annotations
    )


def test_missing_node_fails_then_starts_when_the_node_appears(cluster: Cluster, operator) -> None:
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


def test_second_maintenance_of_a_node_fails_and_never_uncordons_it(cluster: Cluster, operator, nodes) -> None:
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


def test_node_deleted_mid_maintenance(cluster: Cluster, operator, namespace: str, nodes) -> None:
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


def test_killed_at_any_point_the_drain_still_completes(cluster: Cluster, operator, namespace: str, nodes) -> None:
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
        operator.kill()
        cluster.kubectl("uncordon", spare)
        if point == "before delete":  # deleted while the operator is down: cleaned up on start
            cluster.kubectl("delete", NM, "nm-" + target, "--wait=false")
        operator.start()
        if point == "before delete":
            eventually(lambda: nm(cluster, "nm-" + target) is None, "the deleted maintenance is finalized after restart")
        else:
            try:
                # A kill inside an eviction request can leave the pod in the PDB's disruptedPods without
                # deleting it; the disruption controller forgets such entries after two minutes.
                eventually(lambda: done(target), f"Succeeded after a kill {point}", timeout=200)
            except AssertionError as error:
                raise AssertionError(f"{error}\nstatus: {nm_status(cluster, 'nm-' + target)}\npods: {[(p['metadata']['name'], p['status'].get('phase'), p['metadata'].get('deletionTimestamp')) for p in pods_on(cluster, target)]}\nall: {[(p['metadata']['name'], p['spec'].get('nodeName'), p['status'].get('phase')) for p in get(cluster, 'pods', '-n', namespace)['items']]}\npdb: {get(cluster, 'pdb', app, '-n', namespace)['status']}\nnodes: {cluster.kubectl('get', 'nodes').stdout}") from None
            assert not pods_on(cluster, target), f"node not drained after a kill {point}"
            delete_nm(cluster, "nm-" + target)
        assert _clean(node(cluster, target)), f"node not clean after a kill {point}"


def test_two_replicas_only_the_lease_holder_acts(cluster: Cluster, operator, operator_factory, nodes) -> None:
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


def test_many_pods_elsewhere_do_not_grow_the_operator(cluster: Cluster, operator, namespace: str, nodes) -> None:
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


def test_works_under_the_first_release_crd_and_switches_when_it_is_upgraded(cluster: Cluster, operator, namespace: str, nodes, tmp_path) -> None:
    """Under 0.1.0's CRD (v1alpha1 only) the operator drains in v1alpha1; once the CRD serves v1beta1 it
    restarts its reconciler in v1beta1 and migrates storage, without the process exiting."""
    leftovers = get(cluster, NM)["items"]
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
        _replace_crd(cluster, _crd_of_release("0.1.0", tmp_path))
        operator.start()
        apply(cluster, {"apiVersion": f"{GROUP}/v1alpha1", "kind": "NodeMaintenance", "metadata": {"name": name},
                        "spec": {"nodeName": target, "reason": "under 0.1.0"}})
        status = eventually(lambda: ((get(cluster, v1alpha1, name) or {}).get("status") or {}).get("phase") == "Succeeded"
                            and get(cluster, v1alpha1, name)["status"], "Succeeded through v1alpha1", timeout=90)
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
        eventually(lambda: get(cluster, "crd", CRD_NAME)["status"]["storedVersions"] == ["v1beta1"], "storedVersions == [v1beta1]", timeout=60)
        assert operator.process.alive() and operator.starts == starts, "the operator restarted as a process"
        assert "restarting the reconciler" in operator.logs()
        assert nm_status(cluster, name)["phase"] == "Succeeded"
        delete_nm(cluster, name)  # handled in v1beta1 now: the node is given back
        assert _clean(node(cluster, target))
    finally:
        cluster.kubectl("delete", NM, name, "--ignore-not-found", "--timeout=60s")
        operator.stop()
        _replace_crd(cluster, CRD_FILE)
        point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
        operator.start()

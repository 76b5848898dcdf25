"""Control-plane safety in admission on a cluster with three control-plane nodes: a NodeMaintenance that
would break etcd quorum is refused, judged by the etcd guard PodDisruptionBudget where one exists, else by
the count of Ready control-plane nodes; the refusal says which rule decided."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.coordination.quorum import CONTROL_PLANE_LABELS, ETCD_GUARD_NAMESPACE, ETCD_GUARD_PDBS

from .helpers import NM, apply, eventually, get, pdb, pod

pytestmark = pytest.mark.e2e
CP = {CONTROL_PLANE_LABELS[0]: ""}
GUARD = ETCD_GUARD_PDBS[0]
COUNT_RULE = "judged by the count of Ready control-plane nodes"
GUARD_RULE = f"judged by the etcd quorum guard PodDisruptionBudget {ETCD_GUARD_NAMESPACE}/{GUARD}"


def _create(cluster: Cluster, node_name: str) -> subprocess.CompletedProcess[str]:
    nm = {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": f"nm-{node_name}"},
          "spec": {"nodeName": node_name, "reason": "quorum e2e"}}
    return cluster.kubectl("create", "-f", "-", input=json.dumps(nm), check=False)


def _allowed(cluster: Cluster, node_name: str) -> None:
    result = _create(cluster, node_name)
    assert result.returncode == 0, result.stderr


def _refused(cluster: Cluster, node_name: str, rule: str) -> str:
    result = _create(cluster, node_name)
    assert result.returncode != 0, f"NodeMaintenance of {node_name} admitted"
    assert f"node {node_name!r} is a control-plane node" in result.stderr and rule in result.stderr, result.stderr
    return result.stderr


def _delete(cluster: Cluster, node_name: str) -> None:
    cluster.kubectl("delete", NM, f"nm-{node_name}", "--timeout=60s")


def _allows(cluster: Cluster, count: int) -> bool:
    status = (get(cluster, "pdb", GUARD, "-n", ETCD_GUARD_NAMESPACE) or {}).get("status") or {}
    return status.get("observedGeneration", 0) >= 1 and status.get("disruptionsAllowed") == count


@pytest.mark.usefixtures("etcd_guard_namespace")  # ETCD_GUARD_NAMESPACE, Active
def test_quorum_is_judged_by_ready_control_plane_nodes_then_by_the_etcd_guard(cluster: Cluster, operator: OperatorProcess, admission_webhook: str, nodes: Callable[..., list[str]]) -> None:
    first, second, third = nodes(3, labels=CP)
    # Three Ready: one may go; a second would leave one of three.
    _allowed(cluster, first)
    assert "2 of 3 are Ready and not in maintenance; taking it would leave 1" in _refused(cluster, second, COUNT_RULE)
    _delete(cluster, first)
    _allowed(cluster, second)
    _delete(cluster, second)

    # A fourth control-plane node that never became Ready (no kubelet, here no KWOK): three of four are left,
    # and taking one more would leave two, no majority of four; the unready one itself costs no member.
    down = f"down-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": down, "labels": CP}}))
    try:
        assert "3 of 4 are Ready" in _refused(cluster, first, COUNT_RULE)
        _allowed(cluster, down)
        _delete(cluster, down)

        # The etcd guard budget decides where it exists: one guard pod per member, one disruption allowed.
        labels = {"app": "guard", "e2e": first}
        guards = [pod(f"guard-{n}", ETCD_GUARD_NAMESPACE, n, labels=labels) for n in (first, second, third)]
        apply(cluster, *guards, pdb(GUARD, ETCD_GUARD_NAMESPACE, labels, minAvailable=2))
        try:
            eventually(lambda: _allows(cluster, 1), "the guard allows one disruption")
            _allowed(cluster, first)  # the count alone would refuse it (see above)
            _delete(cluster, first)  # its drain may have evicted the guard pod there: the guard counts what is left
            cluster.kubectl("patch", "pdb", GUARD, "-n", ETCD_GUARD_NAMESPACE, "--type=merge", "-p", '{"spec": {"minAvailable": 3}}')
            eventually(lambda: _allows(cluster, 0), "the guard allows no disruption")
            assert "disruptionsAllowed 0" in _refused(cluster, first, GUARD_RULE)
        finally:
            cluster.kubectl("delete", "pdb", GUARD, "-n", ETCD_GUARD_NAMESPACE, "--ignore-not-found")
            cluster.kubectl("delete", "pods", "-n", ETCD_GUARD_NAMESPACE, "-l", f"e2e={first}", "--wait=false")
    finally:
        cluster.kubectl("delete", "node", down, "--wait=false", "--ignore-not-found")

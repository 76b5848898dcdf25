"""What an admin watches: Events on the NodeMaintenance and the Node, JSON logs, probes and metrics."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess

from .helpers import apply, create_nm, delete_nm, eventually, get, nm_status, pod

pytestmark = pytest.mark.e2e


def _reasons(cluster: Cluster, kind: str, name: str) -> set[str]:
    events = get(cluster, "events", "-A", "--field-selector", f"involvedObject.kind={kind},involvedObject.name={name}")
    return {e["reason"] for e in (events or {}).get("items", [])}


def test_events_logs_probes_and_metrics(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    apply(cluster, pod("one", namespace, target))
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded")
    delete_nm(cluster, name)
    eventually(lambda: {"BeginMaintenance", "SucceedMaintenance", "RemovedMaintenance"} <= _reasons(cluster, "NodeMaintenance", name), "events on the NodeMaintenance")
    eventually(lambda: {"BeginMaintenance", "RemovedMaintenance", "Uncordon"} <= _reasons(cluster, "Node", target), "events on the Node")

    ours = [json.loads(line) for line in operator.logs().splitlines() if line.startswith("{") and f'"{name}"' in line]
    assert {e["msg"] for e in ours} >= {"began maintenance", "node drained", "removed maintenance", "uncordoned node"}
    assert all(e["nodeMaintenance"] == name for e in ours)
    assert all(e["node"] == target for e in ours if e["logger"] == "node_maintenance")

    for probe in ("/healthz", "/readyz"):
        with urllib.request.urlopen(operator.health_url + probe, timeout=2) as response:
            assert response.status == 200
    metrics = operator.metrics()
    assert 'node_maintenance_evictions_total{result="evicted"}' in metrics
    assert "node_maintenance_drain_duration_seconds_count" in metrics
    assert "node_maintenance_active 0.0" in metrics  # the maintenance ended

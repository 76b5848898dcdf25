"""What an admin watches: Events on the NodeMaintenance and the Node, JSON logs, probes and metrics."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
import yaml

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
    eventually(lambda: {"BeginMaintenance", "RemovedMaintenance", "Uncordon"} <= _reasons(cluster, "Node", target), "events on the Node")
    # The hand-back is told on the node, which stays; the NodeMaintenance, gone, has its own two events and no more.
    assert _reasons(cluster, "NodeMaintenance", name) == {"BeginMaintenance", "SucceedMaintenance"}

    ours = [json.loads(line) for line in operator.logs().splitlines() if line.startswith("{") and f'"{name}"' in line]
    assert {e["msg"] for e in ours} >= {"began maintenance", "node drained", "removed maintenance", "uncordoned node"}
    assert all(e["nodeMaintenance"] == name for e in ours)
    assert all(e["node"] == target for e in ours if e["logger"] == "node_maintenance")

    for probe in ("/healthz", "/readyz"):
        with urllib.request.urlopen(operator.health_url + probe, timeout=2) as response:
            assert response.status == 200
    metrics = operator.metrics()  # over HTTPS, as a ServiceAccount bound to the metrics-reader ClusterRole
    assert 'node_maintenance_evictions_total{result="evicted"}' in metrics
    assert "node_maintenance_drain_duration_seconds_count" in metrics
    assert "node_maintenance_active 0.0" in metrics  # the maintenance ended


def test_metrics_are_read_only_by_whom_the_api_server_allows(cluster: Cluster, operator: OperatorProcess) -> None:
    """Over HTTPS, a request without a token is 401, one of a user not allowed to get /metrics 403; the probes'
    port no longer serves them in clear."""
    assert operator.metrics_port, "the newest CSV serves /metrics on a port of its own"
    unauthenticated = operator.scrape("")
    assert unauthenticated[0] == 401, unauthenticated
    stranger = yaml.safe_load(cluster.service_account_kubeconfig("default", "not-a-scraper").read_text())["users"][0]["user"]["token"]
    assert operator.scrape(stranger)[0] == 403
    assert operator.scrape()[0] == 200
    with pytest.raises(urllib.error.HTTPError) as clear:
        urllib.request.urlopen(operator.health_url + "/metrics", timeout=2)
    assert clear.value.code == 404

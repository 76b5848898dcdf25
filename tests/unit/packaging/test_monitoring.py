"""The monitoring files scrape the Service the bundle ships, and the alerts and the dashboard query only metrics that
exist: the operator's own, kube-state-metrics' state of each maintenance as docs/metrics.md configures it, and
Prometheus's `up`."""

from __future__ import annotations

import json
import re
from typing import Any

from prometheus_client import REGISTRY

from node_maintenance.runtime import metrics  # noqa: F401  registers the operator's metrics
from node_maintenance_packaging import monitoring
from node_maintenance_packaging.bundle import METRICS_SERVICE_FILE
from tests.unit.rendering import ROOT, load_yaml

# The series each metric type exposes, after its family's name (prometheus_client names a counter without _total).
SERIES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}
OPERATOR_SERIES = {
    metric.name + suffix for metric in REGISTRY.collect() if metric.name.startswith("node_maintenance_") for suffix in SERIES[metric.type]
}
# kube-state-metrics' custom resource state metrics of docs/metrics.md, and the scrape health Prometheus records.
OTHER_SERIES = {"kube_nodemaintenance_phase", "kube_nodemaintenance_drain_progress", "up"}
FUNCTIONS_AND_KEYWORDS = {"sum", "max", "rate", "increase", "histogram_quantile", "absent", "by", "le"}


def _series(expr: str) -> set[str]:
    """The metric names an expression reads: identifiers outside label matchers, ranges and grouping, not functions."""
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\bby \([^)]*\)", "", expr)
    return set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", bare)) - FUNCTIONS_AND_KEYWORDS


def _rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ROOT / monitoring.PROMETHEUS_RULE_FILE)["spec"]["groups"] for rule in group["rules"]]


def _panel_exprs() -> dict[str, list[str]]:
    dashboard = json.loads((ROOT / monitoring.DASHBOARD_FILE).read_text())
    return {panel["title"]: [target["expr"] for target in panel["targets"]] for panel in dashboard["panels"]}


def test_the_service_monitor_selects_the_bundles_metrics_service_by_its_labels_and_port() -> None:
    service = load_yaml(ROOT / "bundle/manifests" / METRICS_SERVICE_FILE)
    monitor = load_yaml(ROOT / monitoring.SERVICE_MONITOR_FILE)
    namespace = load_yaml(ROOT / "olm-deploy-manifests/kubernetes/nm-ns.yaml")["metadata"]["name"]
    assert monitor["metadata"]["namespace"] == namespace
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["scheme"] == "https" and endpoint["bearerTokenFile"]


def test_the_operator_down_alert_watches_the_scrape_job_named_after_the_service() -> None:
    service = load_yaml(ROOT / "bundle/manifests" / METRICS_SERVICE_FILE)
    (down,) = [rule for rule in _rules() if rule["alert"] == "NodeMaintenanceOperatorDown"]
    assert f'job="{service["metadata"]["name"]}"' in down["expr"]


def test_the_alerts_query_only_metrics_that_exist() -> None:
    for rule in _rules():
        assert _series(rule["expr"]) <= OPERATOR_SERIES | OTHER_SERIES, rule["alert"]


def test_the_dashboard_shows_every_operator_metric_and_queries_nothing_else() -> None:
    queried = {name for exprs in _panel_exprs().values() for expr in exprs for name in _series(expr)}
    assert queried <= OPERATOR_SERIES
    families = {metric.name for metric in REGISTRY.collect() if metric.name.startswith("node_maintenance_")}
    assert {name for name in families if not any(series.startswith(name) for series in queried)} == set()


def test_the_metrics_page_explains_every_shipped_alert() -> None:
    page = (ROOT / "docs/metrics.md").read_text()
    explained = set(re.findall(r"^\| `(NodeMaintenance\w+)` \|", page, re.M))
    assert explained == {rule["alert"] for rule in _rules()}

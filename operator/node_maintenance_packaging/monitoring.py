"""What a cluster's monitoring needs for the current release: a ServiceMonitor, the alerts as a PrometheusRule and a
Grafana dashboard, under ``monitoring/``.

The ServiceMonitor selects the bundle's metrics Service by that Service's own labels and port, and the alerts name its
scrape job after it, so they follow the Service rather than repeat it.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from . import yamlout
from .bundle import metrics_service
from .clusterserviceversion import DEPLOYMENT, NAMESPACE
from .errors import PackagingError
from .files import Output, RenderedFile
from .releases import Releases
from .templating import Templates

DIRECTORY = PurePosixPath("monitoring")
SERVICE_MONITOR_FILE = DIRECTORY / "servicemonitor.yaml"
PROMETHEUS_RULE_FILE = DIRECTORY / "prometheusrule.yaml"
DASHBOARD_FILE = DIRECTORY / "grafana-dashboard.json"
DASHBOARD_TITLE = "Node Maintenance Operator"


def monitoring_objects(templates: Templates, releases: Releases) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The ServiceMonitor, the PrometheusRule and the dashboard of the current release (the chart ships them too)."""
    release = releases.current
    if not release.has("secure-metrics"):
        raise PackagingError(f"release {release.version}: the monitoring files scrape /metrics over HTTPS, which needs the "
                             "secure-metrics feature")
    service = metrics_service(templates, release)
    (port,) = service["spec"]["ports"]
    # With the Prometheus Operator, a ServiceMonitor's scrape job is named after the Service it found.
    job = service["metadata"]["name"]
    monitor = templates.yaml("monitoring/servicemonitor.yaml.j2", object_name=DEPLOYMENT, namespace=NAMESPACE, service=service, port=port)
    rule = templates.yaml("monitoring/prometheusrule.yaml.j2", object_name=DEPLOYMENT, namespace=NAMESPACE, job=job)
    dashboard = templates.yaml("monitoring/dashboard.yaml.j2", title=DASHBOARD_TITLE, uid=DEPLOYMENT)
    return monitor, rule, dashboard


def render_monitoring(templates: Templates, releases: Releases) -> Output:
    """``monitoring/``: the files docs/metrics.md tells how to apply."""
    monitor, rule, dashboard = monitoring_objects(templates, releases)
    files = (
        RenderedFile.text(str(SERVICE_MONITOR_FILE), yamlout.dump(monitor)),
        RenderedFile.text(str(PROMETHEUS_RULE_FILE), yamlout.dump(rule)),
        RenderedFile.text(str(DASHBOARD_FILE), json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"),
    )
    return Output(files, owned_dirs=(DIRECTORY,))

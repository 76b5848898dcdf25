"""Prometheus metrics of the operator."""

from prometheus_client import Counter, Gauge, Histogram

ACTIVE = Gauge("node_maintenance_active", "NodeMaintenances currently holding their node")
EVICTIONS = Counter("node_maintenance_evictions_total", "Pod removals attempted by drains, by result", ["result"])
DRAIN_SECONDS = Histogram(
    "node_maintenance_drain_duration_seconds",
    "Time from a NodeMaintenance's creation until its node was drained",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
)

"""Prometheus metrics of the operator."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

ACTIVE = Gauge("node_maintenance_active", "NodeMaintenances currently holding their node")
EVICTIONS = Counter("node_maintenance_evictions_total", "Pod removals attempted by drains, by result", ["result"])
ESCALATIONS = Counter("node_maintenance_escalations_total", "Pods deleted by a drain's escalation ladder instead of evicted, by action",
                      ["action"])
DRAIN_SECONDS = Histogram(
    "node_maintenance_drain_duration_seconds",
    "Time from the start of a drain (when the node was taken) until the node was drained",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
)

# The policies' decisions: what they cost as a fleet grows (a change should decide again only the lines it touches).
POLICY_CHANGES = Counter("node_maintenance_policy_changes_total",
                         "Changes the policies' watches brought to their decisions: a node, a NodeMaintenance, a policy, a hook Job, a listing")
LINES_DECIDED = Counter("node_maintenance_policy_lines_decided_total", "Times a NodeMaintenancePolicy's line was decided", ["policy"])
DECISION_SECONDS = Counter("node_maintenance_policy_decision_cpu_seconds_total",
                           "CPU time the policies' decisions took (each burst of changes is decided once)")


class Active:
    """The NodeMaintenances holding their node, behind the ``ACTIVE`` gauge.

    One instance per reconciler, used only from the event loop: no shared mutable module state.
    """

    def __init__(self) -> None:
        self._names: set[str] = set()

    def holding(self, name: str, holds: bool) -> None:
        (self._names.add if holds else self._names.discard)(name)
        ACTIVE.set(len(self._names))

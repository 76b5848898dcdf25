"""Where the Helm tests install the chart, and who the operator is there: the real-node cluster's audit log records
every request of that user (the cluster is made knowing it), so that the test proves what the chart's RBAC allows
was asked for, and nothing was refused."""

from __future__ import annotations

from node_maintenance.api import SERVICE_ACCOUNT

NAMESPACE = "helm-nmo"
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"

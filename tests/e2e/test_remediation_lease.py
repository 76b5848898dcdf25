"""Coordination with remediation (medik8s): the node's Lease and the exclude-from-remediation label are held
while the node is in maintenance, a Lease another holder owns keeps the maintenance from starting until it
is released or expires, and the node is given back exactly as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.coordination import remediation

from .helpers import apply, create_nm, delete_nm, eventually, foreign_lease, get, nm_status, node

pytestmark = pytest.mark.e2e
NAMESPACE = remediation.DEFAULT_LEASE_NAMESPACE


def _lease(cluster: Cluster, node_name: str) -> dict[str, Any] | None:
    return get(cluster, "lease", remediation.lease_name(node_name), "-n", NAMESPACE)


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), {})


def _reasons(cluster: Cluster, name: str) -> list[tuple[str, str]]:
    events = get(cluster, "events", "-A", "--field-selector", f"involvedObject.kind=NodeMaintenance,involvedObject.name={name}")
    return [(e["reason"], e["message"]) for e in (events or {}).get("items", [])]


def _label(node_obj: dict[str, Any]) -> str | None:
    return (node_obj["metadata"].get("labels") or {}).get(remediation.EXCLUDE_LABEL)


def test_a_lease_held_by_remediation_keeps_the_node_until_released(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], lease_namespace: str) -> None:
    (target,) = nodes(1)
    apply(cluster, foreign_lease(target, 3600))
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    refused = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Failed" and s, "refused while the Lease is held")
    assert "belongs to NodeHealthCheck" in refused["lastError"] and f"{NAMESPACE}/node-{target}" in refused["lastError"]
    assert _condition(refused, remediation.CONDITION)["reason"] == "HeldByAnother"
    assert "NodeHealthCheck" in _condition(refused, remediation.CONDITION)["message"]
    eventually(lambda: any(r == "FailedMaintenance" and "NodeHealthCheck" in m for r, m in _reasons(cluster, name)), "an event naming the holder")
    untouched = node(cluster, target)
    assert not untouched["spec"].get("unschedulable") and _label(untouched) is None
    foreign = _lease(cluster, target)
    assert foreign is not None and foreign["spec"]["holderIdentity"] == "NodeHealthCheck"

    cluster.kubectl("delete", "lease", remediation.lease_name(target), "-n", NAMESPACE)  # remediation gives it up
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance once the Lease is free", timeout=30)
    lease = _lease(cluster, target)
    assert lease is not None and lease["spec"]["holderIdentity"] == remediation.HOLDER_IDENTITY
    # Created for its first term, renewed to the hour once half of it has passed.
    lease = eventually(lambda: (held := _lease(cluster, target)) is not None
                       and held["spec"]["leaseDurationSeconds"] == remediation.REMEDIATION_LEASE_SECONDS and held,
                       "the Lease renewed for the hour", timeout=remediation.FIRST_LEASE_SECONDS)
    assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node" and lease["metadata"]["ownerReferences"][0]["name"] == target
    held = node(cluster, target)
    assert held["spec"].get("unschedulable") and _label(held) == "true"
    assert _condition(nm_status(cluster, name), remediation.CONDITION)["status"] == "True"

    delete_nm(cluster, name)
    given_back = node(cluster, target)
    assert not given_back["spec"].get("unschedulable") and _label(given_back) is None
    assert remediation.LABEL_BEFORE not in (given_back["metadata"].get("annotations") or {})
    eventually(lambda: _lease(cluster, target) is None, "the Lease released")


def test_an_expired_lease_is_taken_over_and_a_label_set_before_stays(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], lease_namespace: str) -> None:
    (target,) = nodes(1, labels={remediation.EXCLUDE_LABEL: "true"})
    apply(cluster, foreign_lease(target, 4))
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: "NodeHealthCheck" in nm_status(cluster, name).get("lastError", ""), "refused while the Lease is valid")
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance once the Lease expired", timeout=30)
    taken = _lease(cluster, target)
    assert taken is not None and taken["spec"]["holderIdentity"] == remediation.HOLDER_IDENTITY and taken["spec"]["leaseTransitions"] == 1
    delete_nm(cluster, name)
    assert _label(node(cluster, target)) == "true"  # it was there before the maintenance: it stays
    eventually(lambda: _lease(cluster, target) is None, "the Lease released")

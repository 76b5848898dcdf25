"""Uninstalling as OLM documents it (delete the Subscription, then the CSV) removes the operator but not
the CRD: NodeMaintenances and their nodes stay as they were, and a reinstall takes them over again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from node_maintenance.api import CRD_NAME
from node_maintenance.coordination import remediation

from ....releases import HEAD
from ...helpers import NM, create_nm, delete_nm, eventually, existing, get, nm, node, our_taint
from .install import Install

pytestmark = pytest.mark.e2e


def test_uninstall_keeps_node_maintenances_and_reinstall_picks_them_up(cluster: Cluster, install: Install, nodes: Callable[..., list[str]]) -> None:
    install.apply()
    install.wait_plan_complete(HEAD)
    install.wait_succeeded(HEAD)
    (target,) = nodes(1)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    # Succeeded, and the node's remediation Lease recorded as held: the step that claims the Lease learns that it holds
    # only from the claim's answer, so its condition comes with the status written next, which may follow Succeeded.
    before = eventually(lambda: settled(existing(cluster, NM, name)), "maintenance Succeeded with its Lease recorded", timeout=90)

    install.uninstall()
    eventually(lambda: get(cluster, "deployment", "node-maintenance-operator", "-n", install.namespace) is None,
               "the operator's Deployment removed by OLM")
    assert get(cluster, "crd", CRD_NAME) is not None, "OLM leaves the CRD in place"
    # ... and, with nothing left to answer it, takes the conversion webhook out of it.
    eventually(lambda: existing(cluster, "crd", CRD_NAME)["spec"]["conversion"]["strategy"] == "None",
               "the CRD's conversion strategy None after the uninstall")
    after = nm(cluster, name)
    assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
    # lastUpdate says when the operator last wrote the status, which it may do until it is stopped; the state kept
    # is everything else.
    assert after["spec"] == before["spec"] and settled_state(after) == settled_state(before)
    held = node(cluster, target)
    assert held["spec"].get("unschedulable") is True and our_taint(held), "the node stays in maintenance"

    install.apply()  # reinstall from the same manifests
    install.wait_plan_complete(HEAD)
    install.wait_succeeded(HEAD)
    delete_nm(cluster, name)  # the new operator runs the maintenance's finalizer: the node is released
    released = node(cluster, target)
    assert not released["spec"].get("unschedulable") and not our_taint(released)


def settled(maintenance: dict[str, Any]) -> dict[str, Any] | None:
    """The maintenance once Succeeded with its remediation Lease's condition; None before."""
    status = maintenance.get("status") or {}
    leased = any(c.get("type") == remediation.CONDITION for c in status.get("conditions") or [])
    return maintenance if status.get("phase") == "Succeeded" and leased else None


def settled_state(maintenance: dict[str, Any]) -> dict[str, Any]:
    """A maintenance's status without the time of its last write."""
    return {key: value for key, value in maintenance["status"].items() if key != "lastUpdate"}

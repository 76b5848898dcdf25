"""Control-plane safety: a NodeMaintenance that would break etcd quorum is refused, naming the rule that decided."""

from __future__ import annotations

import pytest

from node_maintenance.coordination.quorum import refusal
from tests.unit.builders import CONTROL_PLANE_LABEL, control_plane_node, etcd_guard, node

MASTER = "node-role.kubernetes.io/master"
THREE = [control_plane_node("m1"), control_plane_node("m2"), control_plane_node("m3")]


def test_a_worker_is_never_judged() -> None:
    assert refusal(node("w1", labels={}, ready=True), THREE, {"m1", "m2"}, [etcd_guard(0)]) is None


@pytest.mark.parametrize("label", [CONTROL_PLANE_LABEL, MASTER])
def test_the_etcd_guard_decides_where_it_exists(label: str) -> None:
    node = control_plane_node("m1", labels={label: ""})
    reason = refusal(node, THREE, set(), [etcd_guard(0)])
    assert reason and "etcd quorum guard PodDisruptionBudget openshift-etcd/etcd-guard-pdb" in reason
    assert "disruptionsAllowed 0" in reason and "'m1' is a control-plane node" in reason
    # One allowed disruption: allowed, even though the Ready count alone would refuse (two nodes unready).
    two_unready = [control_plane_node("m1"), control_plane_node("m2", ready=False), control_plane_node("m3", ready=False)]
    assert refusal(node, two_unready, set(), [etcd_guard(1)]) is None
    assert "openshift-etcd/etcd-quorum-guard" in (refusal(node, THREE, set(), [etcd_guard(0, "etcd-quorum-guard")]) or "")


def test_without_a_guard_the_ready_control_plane_nodes_must_keep_a_majority() -> None:
    assert refusal(THREE[0], THREE, set(), []) is None  # 3 Ready: 2 left of 3 is a majority
    one_in_maintenance = refusal(THREE[0], THREE, {"m2"}, [])
    assert one_in_maintenance and "count of Ready control-plane nodes" in one_in_maintenance
    assert "2 of 3 are Ready and not in maintenance; taking it would leave 1, fewer than the majority of 2" in one_in_maintenance
    unready = refusal(THREE[0], [THREE[0], THREE[1], control_plane_node("m3", ready=False)], set(), [])
    assert unready and "2 of 3 are Ready" in unready and "etcd-guard" not in unready
    five = [control_plane_node(f"m{i}") for i in range(5)]
    assert refusal(five[0], five, {"m1"}, []) is None  # 4 of 5 available: 3 left is a majority
    assert refusal(five[0], five, {"m1", "m2"}, []) is not None  # 3 of 5: 2 left is not


def test_a_node_already_down_or_alone_costs_no_member() -> None:
    down = control_plane_node("m1", ready=False)
    assert refusal(down, [down, THREE[1], control_plane_node("m3", ready=False)], set(), []) is None
    assert refusal(THREE[0], [THREE[0]], set(), []) is None  # a single control-plane node: no majority to keep
    assert refusal(THREE[0], [], set(), []) is None  # the node itself counts even when the listing missed it

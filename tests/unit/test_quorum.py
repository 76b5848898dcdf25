"""Control-plane safety: a NodeMaintenance that would break etcd quorum is refused, naming the rule that decided."""

from __future__ import annotations

import pytest

from node_maintenance.coordination.quorum import refusal
from node_maintenance.webhooks.admission import Facts, deny_reason

CP = "node-role.kubernetes.io/control-plane"
MASTER = "node-role.kubernetes.io/master"


def a_node(name: str, *, label: str | None = CP, ready: bool = True) -> dict:
    return {"metadata": {"name": name, "labels": {label: ""} if label else {}},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def guard(allowed: int, name: str = "etcd-guard-pdb") -> dict:
    return {"metadata": {"name": name, "namespace": "openshift-etcd"}, "status": {"disruptionsAllowed": allowed}}


THREE = [a_node("m1"), a_node("m2"), a_node("m3")]


def test_a_worker_is_never_judged() -> None:
    assert refusal(a_node("w1", label=None), THREE, {"m1", "m2"}, [guard(0)]) is None


@pytest.mark.parametrize("label", [CP, MASTER])
def test_the_etcd_guard_decides_where_it_exists(label: str) -> None:
    node = a_node("m1", label=label)
    reason = refusal(node, THREE, set(), [guard(0)])
    assert reason and "etcd quorum guard PodDisruptionBudget openshift-etcd/etcd-guard-pdb" in reason
    assert "disruptionsAllowed 0" in reason and "'m1' is a control-plane node" in reason
    # One allowed disruption: allowed, even though the Ready count alone would refuse (two nodes unready).
    assert refusal(node, [a_node("m1"), a_node("m2", ready=False), a_node("m3", ready=False)], set(), [guard(1)]) is None
    assert "openshift-etcd/etcd-quorum-guard" in refusal(node, THREE, set(), [guard(0, "etcd-quorum-guard")])


def test_without_a_guard_the_ready_control_plane_nodes_must_keep_a_majority() -> None:
    assert refusal(THREE[0], THREE, set(), []) is None  # 3 Ready: 2 left of 3 is a majority
    one_in_maintenance = refusal(THREE[0], THREE, {"m2"}, [])
    assert one_in_maintenance and "count of Ready control-plane nodes" in one_in_maintenance
    assert "2 of 3 are Ready and not in maintenance; taking it would leave 1, fewer than the majority of 2" in one_in_maintenance
    unready = refusal(THREE[0], [THREE[0], THREE[1], a_node("m3", ready=False)], set(), [])
    assert unready and "2 of 3 are Ready" in unready and "etcd-guard" not in unready
    five = [a_node(f"m{i}") for i in range(5)]
    assert refusal(five[0], five, {"m1"}, []) is None  # 4 of 5 available: 3 left is a majority
    assert refusal(five[0], five, {"m1", "m2"}, []) is not None  # 3 of 5: 2 left is not


def test_a_node_already_down_or_alone_costs_no_member() -> None:
    down = a_node("m1", ready=False)
    assert refusal(down, [down, THREE[1], a_node("m3", ready=False)], set(), []) is None
    assert refusal(THREE[0], [THREE[0]], set(), []) is None  # a single control-plane node: no majority to keep
    assert refusal(THREE[0], [], set(), []) is None  # the node itself counts even when the listing missed it


def test_admission_counts_other_maintenances_and_says_which_rule() -> None:
    def nm(name: str, node: str) -> dict:
        return {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": name},
                "spec": {"nodeName": node}}

    facts = Facts(THREE[1], [nm("first", "m1")], [], control_plane=THREE)
    reason = deny_reason(nm("second", "m2"), facts)
    assert reason and reason.startswith("NodeMaintenance second: node 'm2' is a control-plane node")
    assert "count of Ready control-plane nodes" in reason
    # Its own object (an update replaying admission) is not another maintenance.
    assert deny_reason(nm("first", "m1"), Facts(THREE[0], [nm("first", "m1")], [], control_plane=THREE)) is None
    assert "etcd quorum guard" in deny_reason(nm("a", "m1"), Facts(THREE[0], [], [guard(0)], control_plane=THREE))

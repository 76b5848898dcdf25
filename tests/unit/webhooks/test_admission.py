"""The admission rules for new NodeMaintenances, each refusal naming the node, the reason and the fix; on a
control-plane node the quorum rule, counting the other maintenances."""

from __future__ import annotations

from functools import partial

from node_maintenance.webhooks.admission import Facts, deny_reason, unreadable
from tests.unit import builders
from tests.unit.builders import CONTROL_PLANE_LABEL, control_plane_node, etcd_guard, node

NODE = node("n1", labels={})
MASTER = node("m1", labels={CONTROL_PLANE_LABEL: ""})
THREE = [control_plane_node("m1"), control_plane_node("m2"), control_plane_node("m3")]
nm = partial(builders.nm, version="v1beta1")  # as a client sends them: with apiVersion and kind


def test_allows_a_first_maintenance_of_an_existing_node() -> None:
    assert deny_reason(nm("a", "n1"), Facts(NODE, [], [])) is None


def test_refuses_a_missing_node() -> None:
    reason = deny_reason(nm("a", "ghost"), Facts(None, [], []))
    assert reason and "node 'ghost' does not exist" in reason and "spec.nodeName" in reason


def test_refuses_a_second_maintenance_of_a_node_in_any_version() -> None:
    existing = nm("first", "n1")
    reason = deny_reason(nm("n1", None, version="v1alpha3"), Facts(NODE, [existing], []))  # v1alpha3: the name is the node
    assert reason and "already in maintenance by NodeMaintenance first" in reason and "delete first" in reason
    assert deny_reason(nm("first", "n1"), Facts(NODE, [existing], [])) is None  # itself is not a duplicate
    assert deny_reason(nm("b", "n2"), Facts(node("n2"), [existing], [])) is None


def test_guards_etcd_quorum_on_control_plane_nodes() -> None:
    reason = deny_reason(nm("a", "m1"), Facts(MASTER, [], [etcd_guard(0)]))
    assert reason and "'m1' is a control-plane node" in reason and "openshift-etcd/etcd-guard-pdb" in reason
    assert deny_reason(nm("a", "m1"), Facts(MASTER, [], [etcd_guard(1)])) is None
    assert deny_reason(nm("a", "m1"), Facts(MASTER, [], [])) is None
    assert deny_reason(nm("a", "n1"), Facts(NODE, [], [etcd_guard(0)])) is None


def test_admission_counts_other_maintenances_and_says_which_rule() -> None:
    facts = Facts(THREE[1], [nm("first", "m1")], [], control_plane=THREE)
    reason = deny_reason(nm("second", "m2"), facts)
    assert reason and reason.startswith("NodeMaintenance second: node 'm2' is a control-plane node")
    assert "count of Ready control-plane nodes" in reason
    # Its own object (an update replaying admission) is not another maintenance.
    assert deny_reason(nm("first", "m1"), Facts(THREE[0], [nm("first", "m1")], [], control_plane=THREE)) is None
    assert "etcd quorum guard" in (deny_reason(nm("a", "m1"), Facts(THREE[0], [], [etcd_guard(0)], control_plane=THREE)) or "")


def test_a_maintenance_whose_node_cannot_be_read_takes_no_node_and_refuses_nothing() -> None:
    broken = nm("broken", None)
    broken["spec"]["nodeName"] = {"name": "m1"}  # stored through a parked annotation before conversions checked it
    assert deny_reason(nm("a", "n1"), Facts(NODE, [broken], [])) is None
    assert deny_reason(nm("a", "m1"), Facts(THREE[0], [broken], [], control_plane=THREE)) is None


def test_an_object_whose_node_name_is_no_string_is_refused_naming_the_field_and_the_fix() -> None:
    obj = nm("a", None)
    obj["spec"]["nodeName"] = {"name": "n1"}
    reason = unreadable(obj)
    assert reason and "NodeMaintenance a: spec.nodeName is an object, not a string" in reason and "kubectl get nodes" in reason
    assert unreadable(nm("a", "n1")) is None and unreadable(nm("n1", None, version="v1alpha3")) is None

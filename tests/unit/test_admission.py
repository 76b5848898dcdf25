"""The admission rules for new NodeMaintenances, each refusal naming the node, the reason and the fix."""

from __future__ import annotations

from node_maintenance.webhooks.admission import Facts, deny_reason

GROUP = "nodemaintenance.kubevirt.io"
NODE = {"metadata": {"name": "n1", "labels": {}}}
MASTER = {"metadata": {"name": "m1", "labels": {"node-role.kubernetes.io/control-plane": ""}}}


def nm(name: str, node: str | None, version: str = "v1beta1") -> dict:
    spec = {"nodeName": node} if node else {}
    return {"apiVersion": f"{GROUP}/{version}", "kind": "NodeMaintenance", "metadata": {"name": name}, "spec": spec}


def guard(allowed: int) -> dict:
    return {"metadata": {"name": "etcd-guard-pdb", "namespace": "openshift-etcd"}, "status": {"disruptionsAllowed": allowed}}


def test_allows_a_first_maintenance_of_an_existing_node() -> None:
    assert deny_reason(nm("a", "n1"), Facts(NODE, [], [])) is None


def test_refuses_a_missing_node() -> None:
    reason = deny_reason(nm("a", "ghost"), Facts(None, [], []))
    assert reason and "node 'ghost' does not exist" in reason and "spec.nodeName" in reason


def test_refuses_a_second_maintenance_of_a_node_in_any_version() -> None:
    existing = nm("first", "n1")
    reason = deny_reason(nm("n1", None, "v1alpha3"), Facts(NODE, [existing], []))  # v1alpha3: the name is the node
    assert reason and "already in maintenance by NodeMaintenance first" in reason and "delete first" in reason
    assert deny_reason(nm("first", "n1"), Facts(NODE, [existing], [])) is None  # itself is not a duplicate
    assert deny_reason(nm("b", "n2"), Facts({"metadata": {"name": "n2"}}, [existing], [])) is None


def test_guards_etcd_quorum_on_control_plane_nodes() -> None:
    reason = deny_reason(nm("a", "m1"), Facts(MASTER, [], [guard(0)]))
    assert reason and "'m1' is a control-plane node" in reason and "openshift-etcd/etcd-guard-pdb" in reason
    assert deny_reason(nm("a", "m1"), Facts(MASTER, [], [guard(1)])) is None
    assert deny_reason(nm("a", "m1"), Facts(MASTER, [], [])) is None
    assert deny_reason(nm("a", "n1"), Facts(NODE, [], [guard(0)])) is None

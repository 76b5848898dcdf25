"""The patches that take a node into maintenance and give it back exactly as it was."""

from __future__ import annotations

from node_maintenance.drain import node

OTHER = {"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}


def a_node(*, unschedulable: bool = False, taints: list | None = None, annotations: dict | None = None) -> dict:
    return {
        "metadata": {"name": "n1", "resourceVersion": "42", "annotations": annotations or {}},
        "spec": {"unschedulable": unschedulable, "taints": taints if taints is not None else [OTHER]},
    }


def test_begin_cordons_taints_and_records_holder_and_earlier_state() -> None:
    patch = node.begin_patch(a_node(), "nm-1")
    assert patch["spec"] == {"unschedulable": True, "taints": [OTHER, node.TAINT]}
    assert patch["metadata"]["annotations"] == {node.HOLDER: "nm-1", node.WAS_UNSCHEDULABLE: "false"}
    assert patch["metadata"]["resourceVersion"] == "42"
    assert node.begin_patch(a_node(unschedulable=True), "nm-1")["metadata"]["annotations"][node.WAS_UNSCHEDULABLE] == "true"


def test_begin_again_adds_no_second_taint_and_keeps_the_record() -> None:
    held = a_node(unschedulable=True, taints=[OTHER, dict(node.TAINT)], annotations={node.HOLDER: "nm-1", node.WAS_UNSCHEDULABLE: "false"})
    patch = node.begin_patch(held, "nm-1")
    assert patch["spec"]["taints"] == [OTHER, node.TAINT]
    assert node.WAS_UNSCHEDULABLE not in patch["metadata"]["annotations"]


def test_end_removes_only_our_taint_and_uncordons_unless_cordoned_before() -> None:
    held = a_node(unschedulable=True, taints=[OTHER, dict(node.TAINT)], annotations={node.HOLDER: "nm-1", node.WAS_UNSCHEDULABLE: "false"})
    patch = node.end_patch(held)
    assert patch["spec"] == {"unschedulable": None, "taints": [OTHER]}
    assert patch["metadata"]["annotations"] == {node.HOLDER: None, node.WAS_UNSCHEDULABLE: None}
    assert node.will_uncordon(held)
    before = a_node(unschedulable=True, taints=[dict(node.TAINT)], annotations={node.HOLDER: "nm-1", node.WAS_UNSCHEDULABLE: "true"})
    assert node.end_patch(before)["spec"] == {"unschedulable": True, "taints": None}
    assert not node.will_uncordon(before)


def test_holder_and_taint_detection() -> None:
    assert node.holder_of(a_node(annotations={node.HOLDER: "x"})) == "x" and node.holder_of(a_node()) is None
    assert node.has_taint(a_node(taints=[dict(node.TAINT)])) and not node.has_taint(a_node())

"""The patches that take a node into maintenance and give it back exactly as it was, also when one
NodeMaintenance takes the node over from another that vanished."""

from __future__ import annotations

from functools import partial

from node_maintenance.drain import nodes
from tests.unit import builders

OTHER = {"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}
a_node = partial(builders.node, "n1", resource_version="42", annotations={}, unschedulable=False, taints=[OTHER])


def test_begin_cordons_taints_and_records_holder_and_earlier_state() -> None:
    patch = nodes.begin_patch(a_node(), "nm-1")
    assert patch["spec"] == {"unschedulable": True, "taints": [OTHER, nodes.TAINT]}
    assert patch["metadata"]["annotations"] == {nodes.HOLDER: "nm-1", nodes.WAS_UNSCHEDULABLE: "false"}
    assert patch["metadata"]["resourceVersion"] == "42"
    assert nodes.begin_patch(a_node(unschedulable=True), "nm-1")["metadata"]["annotations"][nodes.WAS_UNSCHEDULABLE] == "true"


def test_begin_again_adds_no_second_taint_and_keeps_the_record() -> None:
    held = a_node(unschedulable=True, taints=[OTHER, dict(nodes.TAINT)], annotations={nodes.HOLDER: "nm-1", nodes.WAS_UNSCHEDULABLE: "false"})
    patch = nodes.begin_patch(held, "nm-1")
    assert patch["spec"]["taints"] == [OTHER, nodes.TAINT]
    assert nodes.WAS_UNSCHEDULABLE not in patch["metadata"]["annotations"]


def test_end_removes_only_our_taint_and_uncordons_unless_cordoned_before() -> None:
    held = a_node(unschedulable=True, taints=[OTHER, dict(nodes.TAINT)], annotations={nodes.HOLDER: "nm-1", nodes.WAS_UNSCHEDULABLE: "false"})
    patch = nodes.end_patch(held)
    assert patch["spec"] == {"unschedulable": None, "taints": [OTHER]}
    assert patch["metadata"]["annotations"] == {nodes.HOLDER: None, nodes.WAS_UNSCHEDULABLE: None, nodes.WAS_TAINTED: None}
    assert nodes.will_uncordon(held)
    before = a_node(unschedulable=True, taints=[dict(nodes.TAINT)], annotations={nodes.HOLDER: "nm-1", nodes.WAS_UNSCHEDULABLE: "true"})
    assert nodes.end_patch(before)["spec"] == {"unschedulable": True, "taints": None}
    assert not nodes.will_uncordon(before)


def test_holder_and_taint_detection() -> None:
    assert nodes.holder_of(a_node(annotations={nodes.HOLDER: "x"})) == "x" and nodes.holder_of(a_node()) is None
    assert nodes.has_taint(a_node(taints=[dict(nodes.TAINT)])) and not nodes.has_taint(a_node())


def test_a_holder_counts_only_while_its_nodemaintenance_exists() -> None:
    held = a_node(annotations={nodes.HOLDER: "nm-1"})
    assert nodes.live_holder(held, {"nm-1"}.__contains__) == "nm-1"
    assert nodes.live_holder(held, {"nm-2"}.__contains__) is None  # its finalizer removed by hand: a record, no holder
    assert nodes.live_holder(a_node(), {"nm-1"}.__contains__) is None
    assert nodes.live_holder(None, {"nm-1"}.__contains__) is None  # no node: nobody holds it


def test_taking_over_from_a_holder_that_is_gone_keeps_its_record() -> None:
    # nm-old took a schedulable node and vanished without giving it back; nm-new takes over.
    left = builders.node("n1", resource_version="7", holder="nm-old", was_unschedulable=False, unschedulable=True, taints=[nodes.TAINT])
    patch = nodes.begin_patch(left, "nm-new")
    assert patch["metadata"]["annotations"] == {nodes.HOLDER: "nm-new"}  # the record stays "false"
    taken = {**left, "metadata": {**left["metadata"], "annotations": {nodes.HOLDER: "nm-new", nodes.WAS_UNSCHEDULABLE: "false"}}}
    assert nodes.will_uncordon(taken)


def test_a_drain_taint_that_was_there_before_is_still_there_after() -> None:
    tainted = a_node(taints=[OTHER, dict(nodes.TAINT)])
    patch = nodes.begin_patch(tainted, "nm-1")
    assert patch["metadata"]["annotations"][nodes.WAS_TAINTED] == "true"
    assert patch["spec"]["taints"] == [OTHER, nodes.TAINT]  # not added twice
    held = {**tainted, "metadata": {**tainted["metadata"], "annotations": patch["metadata"]["annotations"]}, "spec": patch["spec"]}
    assert nodes.end_patch(held)["spec"]["taints"] == [OTHER, nodes.TAINT]
    assert nodes.WAS_TAINTED not in nodes.begin_patch(a_node(), "nm-1")["metadata"]["annotations"]


def test_a_holder_that_is_gone_left_its_own_taint_which_is_not_recorded_as_earlier() -> None:
    left = builders.node("n1", resource_version="7", holder="nm-old", was_unschedulable=False, unschedulable=True, taints=[nodes.TAINT])
    assert nodes.WAS_TAINTED not in nodes.begin_patch(left, "nm-new")["metadata"]["annotations"]
    assert nodes.end_patch(left)["spec"]["taints"] is None


def test_the_policy_a_node_is_taken_under_is_recorded_until_it_is_given_back() -> None:
    taken = nodes.taken_patch(a_node(), "nm-1", fresh=True, coordinated=False, policy="rolling")
    assert taken is not None and taken["metadata"]["annotations"][nodes.POLICY] == "rolling"
    held = builders.node("n1", resource_version="8", holder="nm-1", policy="rolling", was_unschedulable=False, unschedulable=False,
                         taints=[nodes.TAINT])
    assert nodes.policy_of(held) == "rolling"
    # Cordoned again after someone uncordoned it, under whatever policy selects it now: the record stays.
    again = nodes.taken_patch(held, "nm-1", fresh=False, coordinated=False, policy="other")
    assert again is not None and again["metadata"]["annotations"][nodes.POLICY] == "rolling"
    assert nodes.end_patch(held)["metadata"]["annotations"][nodes.POLICY] is None
    # Taken over under no policy, the record of the holder that is gone goes too.
    left = builders.node("n1", resource_version="9", holder="nm-old", policy="rolling", was_unschedulable=False, unschedulable=True)
    assert nodes.begin_patch(left, "nm-new")["metadata"]["annotations"][nodes.POLICY] is None
    assert nodes.policy_of(builders.node("n1", policy="rolling")) is None  # a record without a holder governs nothing

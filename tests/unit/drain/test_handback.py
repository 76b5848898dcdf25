"""Giving a node back, decided from the Node alone: what a deleted NodeMaintenance patches, releases and says."""

from __future__ import annotations

from typing import Any

from node_maintenance.drain import nodes
from node_maintenance.drain.handback import Handback, hand_back
from node_maintenance.drain.planner import plan
from tests.unit.builders import NOW, held_node, maintenance, scene_node

OTHER = {"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}


def reasons(handback: Handback) -> list[tuple[bool, str]]:
    return [(e.on_node, e.reason) for e in handback.events]


def taken(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` once maintenance nm took it, as a restarted operator reads it back: all it knows is on the node."""
    patch = plan(maintenance(), node, [], [], NOW).node_patch
    assert patch is not None
    return {**node, "metadata": {**node["metadata"], "annotations": {**node["metadata"]["annotations"], **patch["metadata"]["annotations"]}},
            "spec": patch["spec"]}


def test_a_held_node_is_restored_uncordoned_and_its_lease_let_go() -> None:
    back = hand_back("nm", "n1", held_node("nm"), coordinated=True)
    assert back.node_patch is not None and back.node_patch["spec"] == {"unschedulable": None, "taints": None}
    assert back.release_lease and back.uncordons
    assert reasons(back) == [(True, "RemovedMaintenance"), (True, "Uncordon")]  # on the node, which stays; not on the maintenance, which goes


def test_a_node_cordoned_before_the_maintenance_stays_cordoned_and_says_no_uncordon() -> None:
    before = scene_node(holder="nm", was_unschedulable=True, unschedulable=True, taints=[])
    back = hand_back("nm", "n1", before, coordinated=False)
    assert back.node_patch is not None and back.node_patch["spec"]["unschedulable"] is True
    assert not back.uncordons and not back.release_lease
    assert (True, "Uncordon") not in reasons(back)


def fence_through(node: dict[str, Any], name: str = "nm") -> tuple[Handback, Handback]:
    """The two hand-backs of ``name`` on a node it does not hold: the fence's mark set, then, read back, cleared."""
    first = hand_back(name, "n1", node, coordinated=True)
    assert first.fence is not None and first.again
    marked = {**node, "metadata": {**node["metadata"], "resourceVersion": "8",
                                   "annotations": {**node["metadata"]["annotations"], **first.fence["metadata"]["annotations"]}}}
    return first, hand_back(name, "n1", marked, coordinated=True)


def test_a_node_another_maintenance_holds_keeps_its_record_and_its_lease_and_is_only_fenced() -> None:
    first, last = fence_through(held_node("other"))
    assert first.node_patch is None and last.node_patch is None and not first.release_lease and not last.release_lease
    assert first.fence == {"metadata": {"annotations": {nodes.FENCE: "nm"}, "resourceVersion": "7"}}
    assert last.fence == {"metadata": {"annotations": {nodes.FENCE: None}, "resourceVersion": "8"}} and not last.again
    assert reasons(first) == [] and reasons(last) == []  # nothing happened to the node


def test_a_node_never_taken_is_fenced_against_a_late_take_before_its_lease_is_let_go() -> None:
    """A take whose answer never came carries the resourceVersion it read: the fence's first write moves the node past
    it, so the take is refused if it lands after the NodeMaintenance is gone."""
    first, last = fence_through(scene_node())
    assert first.fence is not None and first.fence["metadata"]["resourceVersion"] == "7"
    assert not first.release_lease and last.release_lease and not last.again
    assert last.fence is not None and last.fence["metadata"]["annotations"] == {nodes.FENCE: None}
    assert not fence_through(scene_node())[1].uncordons


def test_a_node_gone_needs_no_fence_and_lets_go_of_a_lease_claimed_first() -> None:
    back = hand_back("nm", "n1", None, coordinated=True)
    assert back.node_patch is None and back.fence is None and back.release_lease
    assert not hand_back("nm", "n1", None, coordinated=False).release_lease


def test_a_node_held_is_given_back_without_a_fence() -> None:
    back = hand_back("nm", "n1", held_node("nm"), coordinated=True)
    assert back.fence is None and not back.again


def test_a_drain_taint_the_node_had_before_the_maintenance_is_still_there_after() -> None:
    held = taken(scene_node(taints=[OTHER, nodes.TAINT]))
    assert held["spec"]["taints"] == [OTHER, nodes.TAINT]  # not added twice
    back = hand_back("nm", "n1", held, coordinated=False)
    assert back.node_patch is not None and back.node_patch["spec"]["taints"] == [OTHER, nodes.TAINT]
    assert back.node_patch["metadata"]["annotations"][nodes.WAS_TAINTED] is None  # the record goes, the taint stays


def test_the_drain_taint_the_maintenance_added_is_removed_and_the_others_stay() -> None:
    held = taken(scene_node(taints=[OTHER]))
    assert held["spec"]["taints"] == [OTHER, nodes.TAINT] and nodes.WAS_TAINTED not in held["metadata"]["annotations"]
    back = hand_back("nm", "n1", held, coordinated=False)
    assert back.node_patch is not None and back.node_patch["spec"]["taints"] == [OTHER]


def test_a_fence_mark_another_deletion_left_goes_with_the_hand_back() -> None:
    """A deletion whose operator was killed between setting its mark and clearing it, its finalizer then removed by hand."""
    held = held_node("nm")
    held["metadata"]["annotations"][nodes.FENCE] = "gone"
    back = hand_back("nm", "n1", held, coordinated=False)
    assert back.node_patch is not None and back.node_patch["metadata"]["annotations"][nodes.FENCE] is None and back.fence is None
    assert nodes.FENCE not in hand_back("nm", "n1", held_node("nm"), coordinated=False).node_patch["metadata"]["annotations"]  # type: ignore[index]

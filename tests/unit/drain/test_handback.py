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
    assert reasons(back) == [(False, "RemovedMaintenance"), (True, "RemovedMaintenance"), (True, "Uncordon")]


def test_a_node_cordoned_before_the_maintenance_stays_cordoned_and_says_no_uncordon() -> None:
    before = scene_node(holder="nm", was_unschedulable=True, unschedulable=True, taints=[])
    back = hand_back("nm", "n1", before, coordinated=False)
    assert back.node_patch is not None and back.node_patch["spec"]["unschedulable"] is True
    assert not back.uncordons and not back.release_lease
    assert (True, "Uncordon") not in reasons(back)


def test_a_node_another_maintenance_holds_is_not_touched_nor_its_lease() -> None:
    back = hand_back("nm", "n1", held_node("other"), coordinated=True)
    assert back.node_patch is None and not back.release_lease
    assert reasons(back) == [(False, "RemovedMaintenance")]


def test_a_node_never_taken_or_gone_lets_go_of_a_lease_claimed_first() -> None:
    for node in (scene_node(), None):
        back = hand_back("nm", "n1", node, coordinated=True)
        assert back.node_patch is None and back.release_lease
        assert not hand_back("nm", "n1", node, coordinated=False).release_lease


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

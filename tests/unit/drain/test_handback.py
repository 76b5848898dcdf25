"""Giving a node back, decided from the Node alone: what a deleted NodeMaintenance patches, releases and says."""

from __future__ import annotations

from node_maintenance.drain.handback import Handback, hand_back
from tests.unit.builders import held_node, scene_node


def reasons(handback: Handback) -> list[tuple[bool, str]]:
    return [(e.on_node, e.reason) for e in handback.events]


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

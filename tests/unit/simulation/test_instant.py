"""The invariants the fault tests and the soak check after every step: each one finds what it must, and only that."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from node_maintenance.drain.nodes import TAINT
from simulation.budgets import desired_healthy, pdb_violations
from simulation.holding import NodeBefore, node_violations
from simulation.settling import settled_violations
from tests.unit import builders

OUR_TAINT = dict(TAINT)
LIFECYCLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
DELETED = "2026-01-01T00:00:00Z"

node = partial(builders.node, annotations={}, unschedulable=False, taints=[])
held = partial(node, unschedulable=True, holder="m1", taints=[OUR_TAINT, LIFECYCLE_TAINT])  # held by m1 as a drain leaves it
nm = partial(builders.nm, name="m1", node="n1", finalizers=["nodemaintenance.kubevirt.io/finalizer"], status={})
pod = partial(builders.pod, labels={"app": "a"}, node="n1")
pdb = partial(builders.budget, "b", labels={"app": "a"}, status={})


FREE = NodeBefore(unschedulable=False, taints=frozenset())
CORDONED = NodeBefore(unschedulable=True, taints=frozenset())


class TestNode:
    def test_a_node_nobody_holds_as_before_is_fine(self) -> None:
        assert node_violations(node(), FREE, []) == []
        assert node_violations(node(unschedulable=True), CORDONED, []) == []

    def test_a_node_held_by_an_existing_maintenance_is_fine(self) -> None:
        assert node_violations(held(), FREE, [nm(status={"phase": "Succeeded"})]) == []
        assert node_violations(held(), FREE, [nm(deleted_at=DELETED)]) == []  # being given back

    def test_wrongly_cordoned_without_a_holder(self) -> None:
        (found,) = node_violations(node(unschedulable=True), FREE, [])
        assert "cordoned while no NodeMaintenance holds it" in found

    def test_wrongly_uncordoned_a_node_cordoned_before(self) -> None:
        (found,) = node_violations(node(), CORDONED, [])
        assert "uncordoned while no NodeMaintenance holds it" in found

    def test_our_taint_left_behind(self) -> None:
        (found,) = node_violations(node(taints=[OUR_TAINT]), FREE, [])
        assert "drain taint" in found

    def test_held_by_a_maintenance_that_is_gone(self) -> None:
        (found,) = node_violations(held(holder="gone"), FREE, [nm(name="other")])
        assert "held by NodeMaintenance gone, which no longer exists" in found

    def test_held_by_a_maintenance_of_another_node(self) -> None:
        (found,) = node_violations(held(), FREE, [nm(node="n2")])
        assert "which is for node n2" in found

    def test_held_but_not_cordoned(self) -> None:
        (found,) = node_violations(node(holder="m1", taints=[OUR_TAINT]), FREE, [nm()])
        assert "not cordoned and tainted" in found

    def test_succeeded_maintenance_whose_node_is_not_held(self) -> None:
        (found,) = node_violations(node(), FREE, [nm(status={"phase": "Succeeded"})])
        assert "reports Succeeded but the node is held by None" in found
        assert node_violations(node(), FREE, [nm(status={"phase": "Succeeded"}, deleted_at=DELETED)]) == []

    def test_foreign_taints_must_stay_and_controller_taints_do_not_count(self) -> None:
        before = NodeBefore.of(node(taints=[{"key": "team", "value": "x", "effect": "NoSchedule"}]))
        (found,) = node_violations(node(), before, [])
        assert "taints not ours changed" in found
        assert node_violations(node(taints=[{"key": "team", "value": "x", "effect": "NoSchedule"}, LIFECYCLE_TAINT]), before, []) == []


class TestBudgets:
    @pytest.mark.parametrize(("spec", "expected", "desired"), [
        ({"minAvailable": 2}, 4, 2),
        ({"minAvailable": "50%"}, 5, 3),  # rounded up
        ({"maxUnavailable": 1}, 4, 3),
        ({"maxUnavailable": "30%"}, 4, 2),  # 1.2 unavailable rounds up to 2
        ({"maxUnavailable": 1}, None, None),  # not counted by the controller yet
        ({}, 3, None),
    ])
    def test_desired_healthy(self, spec: dict[str, Any], expected: int | None, desired: int | None) -> None:
        assert desired_healthy(pdb(expected=expected, **spec)) == desired

    def test_enough_healthy_pods(self) -> None:
        assert pdb_violations([pdb(expected=3, maxUnavailable=1)], [pod("a"), pod("b"), pod("c", ready=False)]) == []

    def test_too_few_healthy_pods(self) -> None:
        pods = [pod("a"), pod("b", deleted_at=DELETED), pod("c", ready=False), pod("other", labels={"app": "z"})]
        (found,) = pdb_violations([pdb(expected=3, minAvailable=2)], pods)
        assert found == "PodDisruptionBudget ns/b: 1 healthy pod(s), it demands 2"


class TestSettled:
    def test_drained_and_nothing_kept(self) -> None:
        daemon = pod("ds", owner="DaemonSet")
        assert settled_violations([held()], [nm(status={"phase": "Succeeded"})], [daemon, pod("x", node="n2")]) == []

    def test_a_deleted_maintenance_kept_by_its_finalizer(self) -> None:
        (found,) = settled_violations([node()], [nm(deleted_at=DELETED)], [])
        assert "deleted but still kept by finalizers" in found

    def test_a_stuck_maintenance(self) -> None:
        found = settled_violations([held()], [nm(status={"phase": "Running"})], [pod("x")])
        assert any("Running, not Succeeded" in f for f in found)
        assert any("not drained, ns/x still there" in f for f in found)

    def test_a_maintenance_of_a_missing_node_waits(self) -> None:
        assert settled_violations([], [nm(status={"phase": "Failed"})], []) == []

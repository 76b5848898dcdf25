"""A take the API server carries out after its caller gave up on it (queued past the client's timeout, or sent by an
operator killed since) must not hold the node for a NodeMaintenance deleted meanwhile: the deletion found the node not
its own, yet the take still carried the resourceVersion the node had then. Run by the operator's own runtime on the
simulated API and clock; the SIGKILL loop met it on a real cluster (a node held by a NodeMaintenance gone)."""

from __future__ import annotations

from node_maintenance.api.paths import nm_path, node_path
from node_maintenance.drain import nodes
from simulation.apiserver import Fault
from simulation.run import Simulation
from tests.unit import builders


class LateNodeWrites:
    """While ``on``, every patch of node n1 times out for the operator and is carried out later (``late_seconds``)."""

    def __init__(self) -> None:
        self.on = True
        self.drawn = 0

    def __call__(self, method: str, path: str) -> Fault:
        if self.on and method == "PATCH" and path == node_path("n1"):
            self.drawn += 1
            return Fault.LATE
        return Fault.NONE


def deleted_after_a_late_take(sim: Simulation, late: LateNodeWrites) -> None:
    """NodeMaintenance m1 of node n1 deleted just after its take was sent, whose answer never comes."""
    sim.api.create(node_path(), builders.node("n1", ready=True))
    sim.start_operator()
    sim.run_for(5)
    sim.api.create(nm_path(), builders.nm("m1", "n1"))
    while not late.drawn:
        sim.step()
    sim.api.delete(nm_path("m1"))


def test_a_take_carried_out_after_its_maintenance_was_deleted_holds_nothing() -> None:
    late = LateNodeWrites()
    with Simulation(late) as sim:
        deleted_after_a_late_take(sim, late)
        late.on = False  # the server answers the deletion's writes; the take is still queued
        sim.run_for(sim.api.late_seconds + 20)
        taken = [w for w in sim.api.writes if w.method == "PATCH" and nodes.HOLDER in w.body["metadata"].get("annotations", {})
                 and w.body["metadata"]["annotations"][nodes.HOLDER] == "m1"]
        assert taken and not any(w.applied for w in taken), taken  # it came, and was refused
        node = sim.api.get_object(node_path("n1"))
        assert node is not None and nodes.holder_of(node) is None and not node.get("spec", {}).get("unschedulable")
        assert nodes.FENCE not in (node["metadata"].get("annotations") or {})  # the fence's mark is gone again
        assert sim.api.get_object(nm_path("m1")) is None and not sim.violations, sim.violations


def test_a_deletion_whose_node_writes_go_unanswered_keeps_its_maintenance_until_they_are_answered() -> None:
    """When in doubt, hold: while no write to the node is answered, the deletion cannot fence the node nor give it
    back, and the NodeMaintenance stays (its finalizer with it); once the server answers again, it goes, and the node is
    as it was."""
    late = LateNodeWrites()
    with Simulation(late) as sim:
        deleted_after_a_late_take(sim, late)
        sim.run_for(3 * sim.api.late_seconds)  # the take lands late, the fence and the hand-back are unanswered
        assert sim.api.get_object(nm_path("m1")) is not None
        late.on = False
        sim.run_for(60)
        node = sim.api.get_object(node_path("n1"))
        assert node is not None and nodes.holder_of(node) is None and not node.get("spec", {}).get("unschedulable")
        assert nodes.FENCE not in (node["metadata"].get("annotations") or {})
        assert sim.api.get_object(nm_path("m1")) is None and not sim.violations, sim.violations

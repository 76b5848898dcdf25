"""A restart as the simulation records it: what the old process wrote as it was stopped is a step of the history, its
promises checked, not a gap between two steps that no check sees."""

from __future__ import annotations

from node_maintenance.api.paths import node_path
from simulation.apiserver import Fault
from simulation.history import ActionKind
from simulation.run import Simulation
from tests.unit import builders


def test_a_write_made_as_the_operator_is_killed_is_a_step_of_its_own() -> None:
    """Seed 2804261928 of Rolling: a ladder's deletion due at the instant of the kill was in no step."""
    with Simulation() as sim:
        sim.api.create(node_path(), builders.node("n1"))
        sim.start_operator()
        sim.step()
        steps = len(sim.history)
        # Due at the instant of the kill: it runs while the old process is stopped.
        sim.time.loop.create_task(sim.api.patch(node_path("n1"), {"metadata": {"labels": {"written": "as killed"}}}))
        sim.restart_operator()
        assert len(sim.history) == steps + 1
        killed = sim.history[-1]
        assert [(a.kind, a.key) for a in killed.actions] == [(ActionKind.NODE_PATCH, "n1")]
        assert killed.seconds() == 0 and not killed.started
        sim.step()
        assert sim.history[-1].started and not sim.history[-1].of_kind(ActionKind.NODE_PATCH)


def test_a_request_that_kills_its_operator_fails_and_the_operator_starts_again_as_the_step_ends() -> None:
    """Fault.KILLED: the write is not applied, and the next step is the new operator's first."""
    def kill(method: str, path: str) -> Fault:
        return Fault.KILLED if (method, path) == ("PATCH", node_path("n1")) else Fault.NONE

    with Simulation(kill) as sim:
        sim.api.create(node_path(), builders.node("n1"))
        sim.start_operator()
        sim.step()
        first = sim.process
        sim.time.loop.create_task(sim.api.patch(node_path("n1"), {"metadata": {"labels": {"written": "never"}}}))
        sim.step()
        assert sim.process is not first and not sim.api.killed
        assert "written" not in (sim.api.get_object(node_path("n1")) or {})["metadata"].get("labels", {})
        sim.step()
        assert sim.history[-1].started

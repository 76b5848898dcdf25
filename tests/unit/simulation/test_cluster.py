"""The simulated cluster's controllers (the ReplicaSets', the scheduler, the disruption controller) act only when what
they read has changed since they last acted: the API's objects, or a workload's scale, which a history changes without
any write. A second in which neither changed costs them nothing, and one in which only a scale changed is not missed."""

from __future__ import annotations

from node_maintenance.api.paths import BUDGETS, PODS, node_path
from simulation.cluster import READY_SECONDS
from simulation.run import Simulation
from tests.unit import builders

WORKLOAD = "app/web"


def _settled(sim: Simulation) -> int:
    """Step until the cluster has stored nothing for longer than a pod takes to become Ready; the API's revision then."""
    quiet = 0
    for _ in range(60):
        revision = sim.api.revision
        sim.step()
        quiet = quiet + 1 if sim.api.revision == revision else 0
        if quiet > READY_SECONDS:
            return sim.api.revision
    raise AssertionError("the cluster kept writing for 60 s")


def _changed_since(sim: Simulation, revision: int) -> list[str]:
    return [f"{c.location.resource}/{c.location.name}" for c in sim.api.history if c.revision > revision]


def test_a_scale_changed_with_nothing_stored_since_is_acted_on() -> None:
    with Simulation() as sim:
        sim.api.create(node_path(), builders.node("n1", ready=True))
        sim.api.create("/apis/policy/v1/namespaces/app/poddisruptionbudgets",
                       builders.budget("web", namespace="app", labels={"app": "web"}, minAvailable=1))
        sim.cluster.workloads[WORKLOAD] = 2
        _settled(sim)
        assert [(p["spec"]["nodeName"], p["status"]["phase"]) for p in sim.api.kept(PODS)] == [("n1", "Running")] * 2
        assert sim.api.kept(BUDGETS)[0]["status"]["expectedPods"] == 2

        sim.cluster.workloads[WORKLOAD] = 3  # the ReplicaSet's controller makes one more pod
        revision = _settled(sim)
        assert len(sim.api.kept(PODS)) == 3
        assert sim.api.kept(BUDGETS)[0]["status"]["expectedPods"] == 3

        sim.cluster.workloads[WORKLOAD] = 1  # no pod is removed, but the disruption controller expects one pod only
        sim.step()
        assert _changed_since(sim, revision) == ["poddisruptionbudgets/web"]
        assert sim.api.kept(BUDGETS)[0]["status"]["expectedPods"] == 1

"""The simulated cluster's controllers (the ReplicaSets', the scheduler, the disruption controller) act only when what
they read has changed since they last acted: the API's objects, or a workload's scale, which a history changes without
any write. A second in which neither changed costs them nothing, and one in which only a scale changed is not missed."""

from __future__ import annotations

from node_maintenance.api.paths import BUDGETS, PODS, node_path
from simulation.run import Simulation
from tests.unit import builders

WORKLOAD = "app/web"


def _quiet(sim: Simulation) -> None:
    """Step until a second stores nothing: every pod bound and Ready, every budget counted."""
    for _ in range(30):
        revision = sim.api.revision
        sim.step()
        if sim.api.revision == revision:
            return
    raise AssertionError("the cluster kept writing for 30 s")


def test_a_scale_changed_with_nothing_stored_since_is_acted_on() -> None:
    with Simulation() as sim:
        sim.api.create(node_path(), builders.node("n1", ready=True))
        sim.api.create("/apis/policy/v1/namespaces/app/poddisruptionbudgets", builders.budget("web", namespace="app", labels={"app": "web"}, minAvailable=1))
        sim.cluster.workloads[WORKLOAD] = 2
        _quiet(sim)
        assert [p["spec"]["nodeName"] for p in sim.api.kept(PODS)] == ["n1", "n1"]
        assert sim.api.kept(BUDGETS)[0]["status"]["expectedPods"] == 2

        sim.cluster.workloads[WORKLOAD] = 3  # the ReplicaSet's controller makes one more pod
        _quiet(sim)
        assert len(sim.api.kept(PODS)) == 3
        assert sim.api.kept(BUDGETS)[0]["status"]["expectedPods"] == 3

        sim.cluster.workloads[WORKLOAD] = 1  # no pod is removed, but the disruption controller expects one pod only
        _quiet(sim)
        assert len(sim.api.kept(PODS)) == 3
        assert sim.api.kept(BUDGETS)[0]["status"]["expectedPods"] == 1

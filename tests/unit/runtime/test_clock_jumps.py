"""A wall clock set forward brings no step of the escalation ladder sooner (break 11): the drain counts its time on the
monotonic clock from when this process first saw it, so a pod past its budget is deleted only once the ladder's
afterSeconds have passed on that clock. Run by the operator's own runtime on the simulated API and clock."""

from __future__ import annotations

from node_maintenance.api.paths import nm_path, node_path
from simulation.run import Simulation
from tests.unit import builders

BUDGETS = "/apis/policy/v1/namespaces/app/poddisruptionbudgets"  # where the workload's budget is
AFTER_SECONDS = 60


def _deleted_pods(sim: Simulation) -> list[str]:
    return [w.path for w in sim.api.writes if w.method == "DELETE" and "/pods/" in w.path and w.applied]


def test_a_wall_clock_set_forward_deletes_no_pod_before_the_ladder_step_has_come() -> None:
    with Simulation() as sim:
        sim.api.create(node_path(), builders.node("n1", ready=True))
        sim.api.create(BUDGETS, builders.budget("web", namespace="app", labels={"app": "web"}, maxUnavailable=0))
        sim.cluster.workloads["app/web"] = 1
        sim.start_operator()
        sim.run_for(10)  # the pod is Ready, its budget allows no disruption
        sim.api.create(nm_path(), builders.nm("m1", "n1", drain={"escalation": [{"afterSeconds": AFTER_SECONDS, "action": "DeletePods"}]}))
        sim.run_for(10)  # the node taken, the eviction refused
        sim.time.jump(3600)
        # The budget's owner edits it: the drain looks again at once (as it does at any change of its pods or budgets).
        sim.api.update(f"{BUDGETS}/web", lambda b: {**b, "metadata": {**b["metadata"], "labels": {"edited": "yes"}}})
        sim.run_for(AFTER_SECONDS - 20)
        assert _deleted_pods(sim) == []  # 50 s into the drain, whatever the wall clock says
        sim.run_for(20)
        assert len(_deleted_pods(sim)) == 1  # the step has come
        assert not sim.violations

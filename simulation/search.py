"""The search for histories that break a promise: hypothesis's stateful testing draws what users, the cluster and
faults do to a simulated cluster under the operator, checks every promise after every simulated second, and, on a
violation, shrinks the history to the shortest it can and prints it with the seed that replays it.

A history starts with a pool of nodes under one NodeMaintenancePolicy, a workload on every node guarded by a
PodDisruptionBudget and a cache pod a Skip rule keeps. Then, in any order: maintenances created and deleted; the
policy's limit changed, the policy replaced; nodes relabelled out of the pool and back, made NotReady and Ready; late
pods bound to a node; API faults switched on and off; the operator restarted; the wall clock jumped; time let pass.
At the end, the faults stop and every maintenance that can finish must have finished.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from node_maintenance.api.paths import nm_path, node_path, pod_path, policy_path
from simulation import settling
from simulation.apiserver import Fault
from simulation.cluster import new_pod
from simulation.run import Simulation

NAMESPACE = "app"
POLICY = "pool"
FAULTS = (Fault.REFUSED, Fault.THROTTLED, Fault.TIMEOUT, Fault.LOST)
SETTLE_SECONDS = 600  # after the last fault: time enough for every maintenance that can finish to finish


def _node(name: str, zone: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"pool": "a", "zone": zone}}, "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def _policy(parallel: int, wait_for_healthy: bool) -> dict[str, Any]:
    return {"metadata": {"name": POLICY}, "spec": {
        "nodeSelector": {"matchLabels": {"pool": "a"}}, "maxParallel": parallel, "waitForHealthy": wait_for_healthy,
        "waitForHealthySeconds": 120, "drainRules": [{"podSelector": {"matchLabels": {"app": "cache"}}, "behavior": "Skip"}]}}


class Search(RuleBasedStateMachine):
    """One history per example; hypothesis draws the rules and their arguments, and shrinks a failing history."""

    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulation | None = None
        self.names: list[str] = []
        self.fault_rate = 0.0
        self.faults_drawn: random.Random = random.Random(0)
        self.quiet_since = 0.0
        self.late = 0

    @property
    def running(self) -> Simulation:
        assert self.sim is not None, "set up"
        return self.sim

    def _fault(self, _method: str, _path: str) -> Fault:
        if self.fault_rate and self.faults_drawn.random() < self.fault_rate:
            return self.faults_drawn.choice(FAULTS)
        return Fault.NONE

    @initialize(nodes=st.integers(3, 5), parallel=st.integers(1, 2), wait_for_healthy=st.booleans(), faults=st.randoms(use_true_random=False))
    def setup(self, nodes: int, parallel: int, wait_for_healthy: bool, faults: random.Random) -> None:
        random.seed(0)  # the executor's retry jitter
        self.faults_drawn = faults
        self.sim = sim = Simulation(self._fault).__enter__()
        self.names = [f"n{i}" for i in range(nodes)]
        for i, name in enumerate(self.names):
            sim.api.create(node_path(), _node(name, f"z{i % 2}"))
        sim.api.create(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
                       {"metadata": {"name": "web"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        sim.cluster.workloads[f"{NAMESPACE}/web"] = nodes
        sim.cluster.workloads[f"{NAMESPACE}/cache"] = 1
        sim.api.create(policy_path(), _policy(parallel, wait_for_healthy))
        sim.start_operator()
        sim.run_for(10)

    # ------------------------------------------------ users
    @rule(node=st.integers(0, 4))
    def create_maintenance(self, node: int) -> None:
        name = self.names[node % len(self.names)]
        if self.running.api.get_object(nm_path(f"m-{name}")) is None:
            self.running.api.create(nm_path(), {"metadata": {"name": f"m-{name}"}, "spec": {"nodeName": name, "reason": "search"}})

    @rule(node=st.integers(0, 4))
    def delete_maintenance(self, node: int) -> None:
        path = nm_path(f"m-{self.names[node % len(self.names)]}")
        if self.running.api.get_object(path) is not None:
            self.running.api.delete(path)

    @rule(parallel=st.integers(0, 3))
    def change_the_limit(self, parallel: int) -> None:
        if self.running.api.get_object(policy_path(POLICY)) is not None:
            self.running.api.update(policy_path(POLICY), lambda p: {**p, "spec": {**p["spec"], "maxParallel": parallel}})

    @rule(gap=st.integers(0, 5))
    def replace_the_policy(self, gap: int) -> None:
        """kubectl replace --force: deleted, and created again ``gap`` seconds later."""
        api = self.running.api
        body = api.get_object(policy_path(POLICY))
        if body is None:
            return
        api.remove(policy_path(POLICY))
        self.running.run_for(gap)
        api.create(policy_path(), {"metadata": {"name": POLICY}, "spec": body["spec"]})

    @rule(node=st.integers(0, 4), pool=st.sampled_from(["a", "b"]))
    def relabel(self, node: int, pool: str) -> None:
        self.running.api.update(node_path(self.names[node % len(self.names)]),
                                lambda n: {**n, "metadata": {**n["metadata"], "labels": {**n["metadata"]["labels"], "pool": pool}}})

    @rule(node=st.integers(0, 4))
    def late_pod(self, node: int) -> None:
        """A pod bound to the node by name, whatever its cordon (a static assignment, a DaemonSet-like controller)."""
        self.late += 1
        self.running.api.create(pod_path(NAMESPACE, ""), new_pod(f"late-{self.late}", NAMESPACE, "late", kind="Job",
                                                                 node=self.names[node % len(self.names)]))

    # ------------------------------------------------ the cluster and its faults
    @rule(node=st.integers(0, 4), ready=st.booleans())
    def readiness(self, node: int, ready: bool) -> None:
        status = "True" if ready else "False"
        self.running.api.update(node_path(self.names[node % len(self.names)]),
                                lambda n: {**n, "status": {"conditions": [{"type": "Ready", "status": status}]}})

    @rule(rate=st.sampled_from([0.0, 0.05, 0.3]))
    def faults(self, rate: float) -> None:
        self.fault_rate = rate

    @rule()
    def restart(self) -> None:
        self.running.restart_operator()

    @rule(seconds=st.sampled_from([-3600, -60, 60, 3600]))
    def jump(self, seconds: int) -> None:
        self.running.time.jump(seconds)

    @rule(seconds=st.integers(1, 40))
    def wait(self, seconds: int) -> None:
        self.running.run_for(seconds)

    @precondition(lambda self: self.sim is not None)
    @invariant()
    def promises_hold(self) -> None:
        assert not self.running.violations, "\n".join(self.running.violations)

    def teardown(self) -> None:
        sim = self.sim
        if sim is None:
            return
        try:
            self.fault_rate = 0.0
            for name in self.names:  # nodes Ready again: a NotReady node's pods never leave
                sim.api.update(node_path(name), lambda n: {**n, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
            quiet = sim.api.clock()
            sim.run_for(SETTLE_SECONDS)
            assert not sim.violations, "\n".join(sim.violations)
            stuck = settling.settled(sim.history, quiet)
            assert not stuck, "\n".join(stuck)
        finally:
            sim.__exit__(None, None, None)

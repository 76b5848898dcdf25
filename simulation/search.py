"""The search for histories that break a promise: hypothesis's stateful testing draws what users, the cluster and
faults do to a simulated cluster under the operator, checks every promise after every simulated second, and, on a
violation, shrinks the history to the shortest it can and prints it with the seed that replays it.

A history starts with a pool of nodes in two zones under one NodeMaintenancePolicy whose shape is drawn too: its
limits, a limit per zone, waitForHealthy, a drain timeout and what it does, an escalation ladder, a maintenance
window and what its end does. How long a new pod takes to become Ready is drawn as well (a slow one keeps a node given
back under waitForHealthy recovering longer), and how long a request to the API takes (none, or 50 ms: one write
in flight while others land). Every node runs a workload guarded by a PodDisruptionBudget; a cache pod
is kept by a Skip rule, a database pod is drained after the rest by a later order, and Job pods that land late either
leave like any pod or are waited for by a WaitCompleted rule until they complete. Then, in any order: maintenances created and
deleted; the policy's limit, drain defaults and window edited, the policy replaced; the budget changed or deleted, the
workload scaled; nodes relabelled out of the pool and back (in one machine, into a zone of their own too), made NotReady and Ready; late pods bound to a node; API
faults switched on and off (one machine's writes may be carried out after the operator gave up on them), watches gone silent; the operator restarted; the wall clock jumped; time let pass. At the
end, the faults stop and every maintenance that can finish must have finished.
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from node_maintenance.api.paths import nm_path, node_path, pod_path, policy_path
from node_maintenance.policy import model
from simulation import settling
from simulation.apiserver import Fault
from simulation.cluster import new_pod
from simulation.history import STEP_SECONDS
from simulation.run import Simulation

NAMESPACE = "app"
POLICY = "pool"
FAULTS = (Fault.REFUSED, Fault.THROTTLED, Fault.TIMEOUT, Fault.LOST)
SETTLE_SECONDS = 600  # after the last fault: time enough for every maintenance that can finish to finish (less once at rest)


def _node(name: str, zone: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"pool": "a", "zone": zone}}, "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


BUDGET = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets"
TIMEOUTS = st.sampled_from([None, 45, 150])
ON_TIMEOUT = st.sampled_from(["Fail", "HandBack"])
LADDERS = st.sampled_from([(), ((20, "DeletePods"),), ((20, "DeletePods"), (40, "ForceDeletePods"))])
WINDOW_ENDS = st.sampled_from([None, "Continue", "Pause"])  # None: no window; else the machine's window (Search.WINDOW)
RULES = [{"podSelector": {"matchLabels": {"app": "cache"}}, "behavior": "Skip"},
         {"podSelector": {"matchLabels": {"app": "batch"}}, "behavior": "WaitCompleted"},
         {"podSelector": {"matchLabels": {"app": "db"}}, "order": 1}]


@dataclass(frozen=True)
class Shape:
    """What a history's policy asks for."""

    parallel: int
    wait_for_healthy: bool
    zones: bool = False  # one node per zone at a time
    timeout: int | None = None
    on_timeout: str = "Fail"
    ladder: tuple[tuple[int, str], ...] = ()
    window_end: str | None = None
    window: tuple[str, str] = ("*/10 * * * *", "5m")  # its schedule and duration, when window_end is not None

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeSelector": {"matchLabels": {"pool": "a"}}, "maxParallel": self.parallel,
                                "waitForHealthy": self.wait_for_healthy, "waitForHealthySeconds": 120, "drainRules": RULES}
        if self.zones:
            spec["topologyLimits"] = [{"topologyKey": "zone", "maxParallel": 1}]
        drain: dict[str, Any] = {}
        if self.timeout is not None:
            drain |= {"timeoutSeconds": self.timeout, "onTimeout": self.on_timeout}
        if self.ladder:
            drain["escalation"] = [{"afterSeconds": after, "action": action} for after, action in self.ladder]
        if drain:
            spec["drain"] = drain
        if self.window_end is not None:
            schedule, duration = self.window
            spec |= {"windows": [{"schedule": schedule, "duration": duration}], "windowEnd": self.window_end}
        return spec


def _budget(max_unavailable: int) -> dict[str, Any]:
    return {"metadata": {"name": "web"}, "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": "web"}}}}


class Search(RuleBasedStateMachine):
    """One history per example; hypothesis draws the rules and their arguments, and shrinks a failing history."""

    WINDOW = Shape.window  # a 5-minute window every 10 minutes: a history of a few minutes meets a close at most once
    FAULTS: tuple[Fault, ...] = FAULTS  # what a request faulted may meet

    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulation | None = None
        self.names: list[str] = []
        self.fault_rate = 0.0
        self.faults_drawn: random.Random = random.Random(0)
        self.shape = Shape(parallel=1, wait_for_healthy=False)
        self.late = 0

    @property
    def running(self) -> Simulation:
        assert self.sim is not None, "set up"
        return self.sim

    def _fault(self, _method: str, _path: str) -> Fault:
        if self.fault_rate and self.faults_drawn.random() < self.fault_rate:
            return self.faults_drawn.choice(self.FAULTS)
        return Fault.NONE

    @initialize(nodes=st.integers(3, 5), parallel=st.integers(1, 2), wait_for_healthy=st.booleans(), zones=st.booleans(),
                timeout=TIMEOUTS, on_timeout=ON_TIMEOUT, ladder=LADDERS, window_end=WINDOW_ENDS,
                ready_seconds=st.sampled_from([5, 30, 90]), latency=st.sampled_from([0.0, 0.05]), faults=st.integers(0, 2**32 - 1))
    def setup(self, nodes: int, parallel: int, wait_for_healthy: bool, zones: bool, timeout: int | None, on_timeout: str,
              ladder: tuple[tuple[int, str], ...], window_end: str | None, ready_seconds: int, latency: float,
              faults: int) -> None:
        random.seed(0)  # the executor's retry jitter
        self.faults_drawn = random.Random(faults)  # hypothesis's randoms refuse to draw once a history ends, as it closes
        self.shape = Shape(parallel, wait_for_healthy, zones, timeout, on_timeout, ladder, window_end, self.WINDOW)
        self.sim = sim = Simulation(self._fault).__enter__()
        sim.cluster.ready_seconds = ready_seconds
        sim.api.latency = latency
        self.names = [f"n{i}" for i in range(nodes)]
        for i, name in enumerate(self.names):
            sim.api.create(node_path(), _node(name, f"z{i % 2}"))
        sim.api.create(BUDGET, _budget(1))
        sim.cluster.workloads[f"{NAMESPACE}/web"] = nodes
        sim.cluster.workloads[f"{NAMESPACE}/cache"] = 1
        sim.cluster.workloads[f"{NAMESPACE}/db"] = 1
        sim.api.create(policy_path(), {"metadata": {"name": POLICY}, "spec": self.shape.spec()})
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

    def _edit(self, shape: Shape) -> None:
        self.shape = shape
        if self.running.api.get_object(policy_path(POLICY)) is not None:
            self.running.api.update(policy_path(POLICY), lambda p: {**p, "spec": shape.spec()})

    @rule(parallel=st.integers(0, 3))
    def change_the_limit(self, parallel: int) -> None:
        self._edit(replace(self.shape, parallel=parallel))

    @rule(zones=st.booleans(), wait_for_healthy=st.booleans())
    def change_the_pacing(self, zones: bool, wait_for_healthy: bool) -> None:
        self._edit(replace(self.shape, zones=zones, wait_for_healthy=wait_for_healthy))

    @rule(timeout=TIMEOUTS, on_timeout=ON_TIMEOUT, ladder=LADDERS)
    def change_the_drain_defaults(self, timeout: int | None, on_timeout: str, ladder: tuple[tuple[int, str], ...]) -> None:
        self._edit(replace(self.shape, timeout=timeout, on_timeout=on_timeout, ladder=ladder))

    @rule(window_end=WINDOW_ENDS)
    def change_the_window(self, window_end: str | None) -> None:
        self._edit(replace(self.shape, window_end=window_end))

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

    @rule(node=st.integers(0, 4), workload=st.sampled_from(["late", "batch"]))
    def late_pod(self, node: int, workload: str) -> None:
        """A Job's pod bound to the node by name, whatever its cordon (a static assignment, a DaemonSet-like
        controller); a batch one the WaitCompleted rule keeps until it completes."""
        self.late += 1
        self.running.api.create(pod_path(NAMESPACE, ""), new_pod(f"{workload}-{self.late}", NAMESPACE, workload, kind="Job",
                                                                 node=self.names[node % len(self.names)]))

    @rule(budget=st.sampled_from([None, 0, 1]))
    def change_the_budget(self, budget: int | None) -> None:
        """The web budget deleted (None), or created again or changed to that maxUnavailable."""
        api, path = self.running.api, f"{BUDGET}/web"
        if budget is None:
            if api.get_object(path) is not None:
                api.remove(path)
        elif api.get_object(path) is None:
            api.create(BUDGET, _budget(budget))
        else:
            api.update(path, lambda b: {**b, "spec": {**b["spec"], "maxUnavailable": budget}})

    @rule(scale=st.integers(0, 5))
    def scale(self, scale: int) -> None:
        self.running.cluster.workloads[f"{NAMESPACE}/web"] = scale

    # ------------------------------------------------ the cluster and its faults
    @rule(node=st.integers(0, 4), ready=st.booleans())
    def readiness(self, node: int, ready: bool) -> None:
        status = "True" if ready else "False"
        self.running.api.update(node_path(self.names[node % len(self.names)]),
                                lambda n: {**n, "status": {"conditions": [{"type": "Ready", "status": status}]}})

    @rule(rate=st.sampled_from([0.0, 0.05, 0.3]))
    def faults(self, rate: float) -> None:
        self.fault_rate = rate

    @rule(seconds=st.integers(5, 60))
    def silence(self, seconds: int) -> None:
        """Every watch goes quiet without ending, for ``seconds``: what changes meanwhile arrives late. What was sent
        before arrives first: the operator cannot know of a change its watch never brought (a policy created as the
        connection died takes effect once the watch notices, after client.async_http.WATCH_INACTIVITY_SECONDS at most, longer
        than any silence drawn here), so the search does not hold it to one."""
        self.running.step()
        self.running.api.silent = True
        try:
            self.running.run_for(seconds)
        finally:
            self.running.api.silent = False

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
            for _ in range(int(SETTLE_SECONDS / STEP_SECONDS)):
                sim.step()
                if settling.at_rest(sim.history):
                    break
            assert not sim.violations, "\n".join(sim.violations)
            stuck = settling.settled(sim.history, quiet)
            assert not stuck, "\n".join(stuck)
        finally:
            sim.__exit__(None, None, None)


class Rolling(Search):
    """Search's histories with the fleet's own rule besides: a node rolled through maintenance, its NodeMaintenance
    created, left to drain for a while and deleted to give the node back. What follows a hand-back (recovery under
    waitForHealthy, the next node's turn, a node relabelled, timed out or maintained again while recovering) then comes
    within a history's few rules, where Search needs three of its own rules in a row for one hand-back. A machine of its
    own, so that every seed of Search still replays the history it found."""

    @rule(node=st.integers(0, 4), seconds=st.sampled_from([20, 60, 180]))
    def roll(self, node: int, seconds: int) -> None:
        self.create_maintenance(node)
        self.running.run_for(seconds)
        self.delete_maintenance(node)


class Windowed(Search):
    """Search's histories under windows that open for a minute every two: a close comes every few rules, so what it does
    to a slot granted just before it, a take retried across it, a drain under way at it or a node given back meets it
    often, where Search's ten-minute windows close once a history at most. A machine of its own, so that every seed of
    Search still replays the history it found."""

    WINDOW = ("*/2 * * * *", "1m")


class Closing(Windowed):
    """Windowed's histories where a maintenance may be created seconds before a window closes: its grant made while the
    window is open, its take retried (a fault, a restart) or its first evictions sent across the close, which Windowed
    meets only when a creation happens to fall in those seconds. A machine of its own, so that every seed of Windowed
    still replays the history it found."""

    CLOSING_WAIT_SECONDS = 240  # the longest it waits for a window to close: two of Windowed's periods

    @rule(node=st.integers(0, 4), before=st.integers(1, 5), faults=st.sampled_from([0.0, 0.3]))
    def create_at_the_close(self, node: int, before: int, faults: float) -> None:
        """A maintenance created ``before`` seconds before the window open now, or the next, closes (at once when the
        policy has no window: nothing closes), the API failing from then on at the rate ``faults`` (a take, or its
        first evictions, retried across the close)."""
        policy = model.Policy.of({"metadata": {"name": POLICY}, "spec": self.shape.spec()})
        for _ in range(self.CLOSING_WAIT_SECONDS):
            window = policy.window(self.running.api.clock())
            if window is None or (window.open and window.closes is not None
                                  and window.closes - self.running.api.clock() <= datetime.timedelta(seconds=before)):
                break
            self.running.step()
        self.fault_rate = faults
        self.create_maintenance(node)


class Late(Rolling):
    """Rolling's histories where a write the operator gave up on may still be carried out, seconds later, against what
    is stored then (``Fault.LATE``): a request queued in the API server past the client's timeout, or sent by an
    operator killed since. A take that lands after its NodeMaintenance was deleted, or a hand-back after the node was
    taken again, is what it looks for. A machine of its own, so that every seed of Rolling still replays the history it
    found."""

    FAULTS = (*FAULTS, Fault.LATE)

    @rule(seconds=st.sampled_from([2, 10, 30]))
    def lateness(self, seconds: int) -> None:
        """How long a write the operator gave up on waits in the server from now on."""
        self.running.api.late_seconds = seconds


class Killed(Rolling):
    """Rolling's histories where a write may fail as its operator dies: the operator is killed as the step ends (its
    node lost, its container killed) and started again (``Fault.KILLED``). Search restarts the operator between rules
    only, seconds after a failed write was tried again; here the next leader meets what the failed write left: a
    hand-back or an eviction that went on when the status that records it was not written. A machine of its own, so
    that every seed of Rolling still replays the history it found. A faulted write is refused or kills, one in two (a
    read is refused): what it looks for is a write failed and no try after it."""

    FAULTS = (Fault.REFUSED, Fault.KILLED)


class Zoned(Rolling):
    """Rolling's histories where a node may move to a zone of its own (a node rebuilt into a new failure domain, its
    zone label corrected): a topology domain of one node, taken, recovering or given back, then leaves and joins the
    pool with it, which Search's two zones of two or more nodes never show. A machine of its own, so that every seed of
    Rolling still replays the history it found."""

    @rule(node=st.integers(0, 4))
    def rezone(self, node: int) -> None:
        name = self.names[node % len(self.names)]
        self.running.api.update(node_path(name), lambda n: {**n, "metadata": {**n["metadata"], "labels": {**n["metadata"]["labels"], "zone": f"z-{name}"}}})


class Retiring(Zoned):
    """Zoned's histories where a node may leave the pool as soon as its maintenance ends (a node rolled, then retired):
    a node given back and recovering under waitForHealthy is then counted by a policy that no longer selects it, in a
    topology domain perhaps no selected node is in any more. A machine of its own, so that every seed of Zoned still
    replays the history it found."""

    @rule(node=st.integers(0, 4), seconds=st.sampled_from([20, 60, 180]))
    def retire(self, node: int, seconds: int) -> None:
        self.roll(node, seconds)
        self.relabel(node, "b")


MACHINES: dict[str, type[Search]] = {"search": Search, "rolling": Rolling, "windowed": Windowed, "late": Late, "zoned": Zoned,
                                     "killed": Killed, "closing": Closing, "retiring": Retiring}

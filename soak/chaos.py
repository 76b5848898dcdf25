"""Faults against a working operator, with the instant invariants (``simulation.holding``, ``simulation.budgets``,
``simulation.settling``) checked after every step.

Used by the fault tests (tests/e2e/faults) and by ``make soak``: a workload of nodes, Deployments and
PodDisruptionBudgets; a monitor that watches the budgets from outside the operator; a supervisor that
restarts the operator when it exits (as the kubelet restarts its container); and the random loop that
creates and deletes NodeMaintenances while the operator is SIGKILLed and its link to the API server
suffers latency, resets and blackouts.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import urllib3
from kubernetes import client

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from devcluster.toxiproxy import Proxy
from devcluster.waiting import polls, wait_for
from node_maintenance import api
from node_maintenance.api import HUB
from simulation.budgets import pdb_violations
from simulation.holding import NodeBefore, node_violations
from simulation.settling import settled_violations

from .background import Background

# A node's state read apart from the NodeMaintenances can look wrong for an instant (one changed in
# between); a node violation counts only if it is still there when looked at again after this long.
CONFIRM_SECONDS = 3.0
# Settling gives up after this many times its stall: a drain that keeps changing without ever finishing.
SETTLE_LIMIT = 5
IMAGE = "registry.invalid/app:1"
# What reading the cluster raises while the API server restarts or a network fault is on: an error
# answer, a connection refused, reset or timed out, or a body cut short.
API_AWAY = (client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


def _items(response: Any) -> list[dict[str, Any]]:
    """The items of a listing the official client left undecoded (``_preload_content=False``)."""
    return cast(list[dict[str, Any]], json.loads(response.data)["items"])


@dataclass
class Tally:
    """What a run did and found; ``violations`` must stay empty."""

    operations: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)  # exit codes of operator processes that ended by themselves
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, kind: str, what: str, n: int = 1) -> None:
        with self._lock:
            (self.operations if kind == "op" else self.faults)[what] += n

    def violate(self, found: list[str]) -> None:
        with self._lock:
            self.violations.extend(f"{time.strftime('%H:%M:%S')} {v}" for v in found)


class Api:
    """The admin's view of the cluster, as plain JSON (the invariants read what the API returns)."""

    def __init__(self, cluster: Cluster) -> None:
        self.client = cluster.api_client()
        self.core = client.CoreV1Api(self.client)
        self.policy = client.PolicyV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)
        self.apps = client.AppsV1Api(self.client)

    def nodes(self, selector: str) -> list[dict[str, Any]]:
        return _items(self.core.list_node(label_selector=selector, _preload_content=False))

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return _items(self.core.list_namespaced_pod(namespace, _preload_content=False, _request_timeout=10))

    def budgets(self, namespace: str) -> list[dict[str, Any]]:
        return _items(self.policy.list_namespaced_pod_disruption_budget(namespace, _preload_content=False, _request_timeout=10))

    def maintenances(self) -> list[dict[str, Any]]:
        return _items(self.custom.list_cluster_custom_object(api.GROUP, HUB, api.PLURAL, _preload_content=False))

    def create_maintenance(self, name: str, node: str) -> None:
        body = {"apiVersion": f"{api.GROUP}/{HUB}", "kind": "NodeMaintenance", "metadata": {"name": name},
                "spec": {"nodeName": node, "reason": "fault test"}}
        self.custom.create_cluster_custom_object(api.GROUP, HUB, api.PLURAL, body)

    def delete_maintenance(self, name: str) -> None:
        self.custom.delete_cluster_custom_object(api.GROUP, HUB, api.PLURAL, name)


@dataclass
class Workload:
    """Nodes to maintain, spare nodes never maintained, and budgeted Deployments spread over all of them."""

    namespace: str
    selector: str  # label selector of every node of the workload
    nodes: list[str]
    spares: list[str]
    before: dict[str, NodeBefore]
    deployments: dict[str, int]  # name -> replicas

    @property
    def pods(self) -> int:
        return sum(self.deployments.values())


# (name, replicas, budget spec): the budgets allow one disruption at a time, in each of their forms.
BUDGETED = (("paced", 6, {"maxUnavailable": 1}), ("quorum", 5, {"minAvailable": 4}), ("half", 4, {"minAvailable": "50%"}))


def build_workload(cluster: Cluster, api_: Api, namespace: str, run: str, *, nodes: int, spares: int,
                   cordoned: int = 0, scale: int = 1, on_targets_only: bool = False) -> Workload:
    """Create the nodes (the first ``cordoned`` of them cordoned beforehand, to be given back so) and the
    Deployments with their budgets (``scale`` times the replicas of ``BUDGETED``); return once every pod is ready.

    With ``on_targets_only`` every pod starts on the nodes to maintain and the spares stay cordoned until
    :func:`open_spares`: a drain evicts one pod per budget, whose replacement waits for room, and holds there."""
    names = [f"{run}-n{i}" for i in range(nodes)]
    spare_names = [f"{run}-s{i}" for i in range(spares)]
    labels = {"fault-run": run}
    for index, name in enumerate(names + spare_names):
        cluster.create_kwok_node(name, labels=labels, unschedulable=index < cordoned or (on_targets_only and name in spare_names))
    for name in names + spare_names:
        cluster.wait_node_ready(name)
    pool = names + spare_names
    deployments = {}
    objects: list[dict[str, Any]] = []
    for name, replicas, budget in BUDGETED:
        deployments[name] = replicas * scale
        objects.append(_deployment(name, namespace, pool, replicas * scale))
        objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
                        "spec": {"selector": {"matchLabels": {"app": name}}, **budget}})
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    workload = Workload(namespace, f"fault-run={run}", names, spare_names, {}, deployments)
    wait_for("every pod of the workload ready and counted by its budget", lambda: _all_ready(api_, workload), 180,
             retrying=API_AWAY, pace=itertools.repeat(0.5))
    workload.before = {n["metadata"]["name"]: NodeBefore.of(n) for n in api_.nodes(workload.selector)}
    return workload


def open_spares(cluster: Cluster, api_: Api, workload: Workload) -> None:
    """Uncordon the spare nodes: evicted pods find room again."""
    for name in workload.spares:
        cluster.kubectl("uncordon", name)
    for node in api_.nodes(workload.selector):
        if node["metadata"]["name"] in workload.spares:
            workload.before[node["metadata"]["name"]] = NodeBefore.of(node)


def _deployment(name: str, namespace: str, pool: list[str], replicas: int) -> dict[str, Any]:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": pool}]}]}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 1, "affinity": affinity,
                                           "containers": [{"name": "c", "image": IMAGE}]}}}}


def _all_ready(api_: Api, workload: Workload) -> bool:
    ready = [p for p in api_.pods(workload.namespace)
             if any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions") or [])]
    counted = all((b.get("status") or {}).get("expectedPods") for b in api_.budgets(workload.namespace))
    return len(ready) == workload.pods and counted


class BudgetMonitor(Background):
    """Reads the workload's pods and budgets every ``interval`` from outside the operator and records
    every moment a budget has fewer healthy pods than it demands."""

    def __init__(self, api_: Api, namespace: str, tally: Tally, interval: float = 0.2) -> None:
        super().__init__("budget monitor")
        self.api, self.namespace, self.tally, self.interval = api_, namespace, tally, interval
        self.samples = 0
        self.errors = 0
        # When the disruptions each budget allows changed (monotonic clock), and to what: a drain slower than usual
        # shows whether the budgets freed late (the cluster's pace) or the operator acted late on them.
        self.allowed: list[tuple[float, dict[str, int]]] = []

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                budgets = self.api.budgets(self.namespace)
                found = pdb_violations(budgets, self.api.pods(self.namespace))
            except API_AWAY:  # the next sample looks again
                self.errors += 1
                continue
            self.samples += 1
            allowed = {b["metadata"]["name"]: int((b.get("status") or {}).get("disruptionsAllowed") or 0) for b in budgets}
            if not self.allowed or self.allowed[-1][1] != allowed:
                self.allowed.append((time.monotonic(), allowed))
            if found:
                self.tally.violate(found)


class Supervisor(Background):
    """Keeps the operator running as the kubelet keeps a container: started again when it exits by itself
    (its exit code is recorded), and SIGKILLed on request (``kill``).

    Every start happens on the supervisor's own thread: a child dies with the thread that started it
    (``processes.die_with_parent``), so no short-lived thread may start the operator. On exit the
    supervisor stops the operator it started, cleanly (the Lease is released)."""

    def __init__(self, operator: OperatorProcess, tally: Tally, backoff: float = 1.0) -> None:
        super().__init__("operator supervisor")
        self.operator, self.tally, self.backoff = operator, tally, backoff
        self.kills = 0
        self._killed: set[int] = set()  # pids SIGKILLed on request: their end is no exit by themselves
        self._wake = threading.Event()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # before the wake-up, which would otherwise find it unset and sleep on
        self._wake.set()
        super().__exit__(*exc)

    def kill(self) -> None:
        """SIGKILL the operator, like the OOM killer, even while it starts; it is started again at once."""
        process = self.operator.process
        if process is None or not process.alive():
            return
        self._killed.add(process.pid)
        process.popen.kill()
        self.kills += 1
        self.tally.count("fault", "operator SIGKILL")
        self._wake.set()

    def wait_running(self, timeout: float = 120) -> None:
        """Until the operator runs and is ready: the last kill's restart may still be under way."""

        wait_for("the operator to run again", self.running, timeout, details=lambda: self.operator.logs()[-4000:])

    def running(self) -> bool:
        """Whether the operator runs and is ready."""
        process = self.operator.process  # the supervisor replaces it on a restart
        return process is not None and process.alive() and self.operator.ready()

    def _run(self) -> None:
        started = False
        while not self._stop.is_set():
            self._wake.wait(self.backoff)
            self._wake.clear()
            process = self.operator.process
            if self._stop.is_set() or process is None or process.alive():
                continue
            process.stop()  # reaped already: closes its log
            if process.pid not in self._killed:
                self.tally.exits.append(process.popen.returncode)
            try:
                self.operator.start()
            except Exception:  # it exited (or was killed) during its start: the next round starts it again
                pass
            started = True
        if started:
            self.operator.stop()


class Checker:
    """The instant node invariants over the workload's nodes, each confirmed by a second look."""

    def __init__(self, api_: Api, workload: Workload, tally: Tally) -> None:
        self.api, self.workload, self.tally = api_, workload, tally
        self.checks = 0
        self.seconds = 0.0  # how long settling took

    def _found(self) -> list[str]:
        return self._nodes_wrong(self.api.nodes(self.workload.selector), self.api.maintenances())

    def _nodes_wrong(self, nodes: list[dict[str, Any]], maintenances: list[dict[str, Any]]) -> list[str]:
        """How each of the workload's nodes is not as the NodeMaintenances say it should be."""
        return [v for n in nodes for v in node_violations(n, self.workload.before[n["metadata"]["name"]], maintenances)]

    def check(self) -> None:
        self.checks += 1
        try:
            first = self._found()
            if not first:
                return
            time.sleep(CONFIRM_SECONDS)
            confirmed = sorted(set(first) & set(self._found()))
        except API_AWAY:  # the next step looks again
            return
        self.tally.violate(confirmed)

    def settled(self, stall: float) -> list[str]:
        """Wait until the operator has caught up, for as long as it gets on: what still fails once nothing left has
        changed for ``stall`` seconds, or once ``SETTLE_LIMIT`` stalls' time has passed (a drain that moves without
        end). A budget allowing one disruption at a time lets the drains finish one eviction per round of the
        Deployment, the scheduler, KWOK and the disruption controller; on a loaded machine each round takes longer,
        so a fixed deadline would judge the machine, and this judges the operator. ``seconds`` says how long it took."""
        started = time.monotonic()
        changed, left = started, None
        for _ in polls(stall * SETTLE_LIMIT, itertools.repeat(1.0)):
            try:
                found = self._left()
            except API_AWAY:  # a check that could not run finds nothing settled, and changes nothing
                continue
            if not found:
                self.seconds = time.monotonic() - started
                return []
            if found != left:
                changed, left = time.monotonic(), found
            elif time.monotonic() - changed >= stall:
                break
        self.seconds = time.monotonic() - started
        return left or [f"nothing could be read for {self.seconds:.0f}s"]

    def _left(self) -> list[str]:
        """What is not settled yet: a maintenance not Succeeded or kept by a finalizer, a node not drained or not as
        it should be."""
        maintenances = [m for m in self.api.maintenances() if m["spec"].get("nodeName") in self.workload.before]
        nodes = self.api.nodes(self.workload.selector)
        return settled_violations(nodes, maintenances, self.api.pods(self.workload.namespace)) + self._nodes_wrong(nodes, maintenances)


NETWORK_FAULTS = ("latency", "reset", "blackout")
KILL_SECONDS = 10  # the first half of a soak asks one SIGKILL per this many seconds of it


def kills_asked(seconds: float) -> int:
    """The SIGKILLs the first half of a soak of ``seconds`` asks for (three at least)."""
    return max(3, int(seconds / 2 / KILL_SECONDS))


@dataclass
class Loop:
    """The random create/delete loop over ``workload``, with kills and network faults on their own clocks."""

    api: Api
    workload: Workload
    supervisor: Supervisor
    tally: Tally
    rng: random.Random
    proxy: Proxy | None = None
    kill_every: tuple[float, float] | None = (3.0, 7.0)  # seconds from the operator ready to its SIGKILL
    fault_every: tuple[float, float] = (4.0, 10.0)  # seconds between network faults
    step_every: tuple[float, float] = (0.5, 2.0)
    prefix: str = "fault"
    _serial: int = 0
    _due: list[str] = field(default_factory=list)  # network faults to inject next, before random ones

    def run(self, seconds: float, until: Callable[[], bool] = lambda: True) -> Checker:
        """Steps for ``seconds``, then on until ``until()`` holds, checking the invariants after each step."""
        checker = Checker(self.api, self.workload, self.tally)
        stop = threading.Event()
        threads = [threading.Thread(target=self._kills, args=(stop,), daemon=True)] if self.kill_every else []
        if self.proxy is not None:
            threads.append(threading.Thread(target=self._network, args=(stop,), daemon=True))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline or not until():
                self._step()
                checker.check()
                time.sleep(self.rng.uniform(*self.step_every))
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        return checker

    def warm_up(self, seconds: float) -> Checker:
        """``run`` for ``seconds`` and on until each network fault has happened once more: a fresh process
        makes its connections, caches and first tracebacks when it first meets each one."""
        self._due = list(NETWORK_FAULTS) if self.proxy is not None else []
        return self.run(seconds, until=lambda: not self._due)

    def _mine(self) -> list[dict[str, Any]]:
        return [m for m in self.api.maintenances() if m["spec"].get("nodeName") in self.workload.before]

    def _step(self) -> None:
        try:
            existing = self._mine()
            taken = {m["spec"]["nodeName"] for m in existing}
            free = [n for n in self.workload.nodes if n not in taken]
            live = [m["metadata"]["name"] for m in existing if not m["metadata"].get("deletionTimestamp")]
            if free and (not live or self.rng.random() < 0.55):
                self._serial += 1
                self.api.create_maintenance(f"{self.prefix}-{self._serial}", self.rng.choice(free))
                self.tally.count("op", "create")
            elif live:
                self.api.delete_maintenance(self.rng.choice(live))
                self.tally.count("op", "delete")
        except client.ApiException as error:
            self.tally.count("op", f"refused ({error.status})")

    def _kills(self, stop: threading.Event) -> None:
        """Each SIGKILL comes ``kill_every`` after the operator is ready again, not after the last kill: on a
        loaded machine a start can take longer than the interval, and an operator killed before it is ever
        ready makes no progress at all, so the loop would wait for work that can never be done."""
        assert self.kill_every is not None
        while not stop.is_set():
            if not self.supervisor.running():
                stop.wait(0.2)
                continue
            if stop.wait(self.rng.uniform(*self.kill_every)):
                return
            self.supervisor.kill()

    def _network(self, stop: threading.Event) -> None:
        assert self.proxy is not None
        while not stop.wait(self.rng.uniform(*self.fault_every)):
            kind = self._due[0] if self._due else self.rng.choice(NETWORK_FAULTS)
            try:
                if kind == "latency":
                    with self.proxy.toxic("latency", {"latency": 300, "jitter": 200}):
                        stop.wait(self.rng.uniform(2, 6))
                elif kind == "reset":
                    self.proxy.reset_connections()
                else:
                    with self.proxy.blackout():
                        stop.wait(self.rng.uniform(1, 5))
            except Exception as error:  # a fault that could not be injected fails the run
                self.tally.violate([f"network {kind} could not be injected: {error}"])
                continue
            self.tally.count("fault", f"network {kind}")
            if self._due and self._due[0] == kind:
                self._due.pop(0)

    def clean_up(self, timeout: float) -> list[str]:
        """Delete every NodeMaintenance of the run; what is left wrong once the operator gave the nodes back."""
        for m in self._mine():
            if not m["metadata"].get("deletionTimestamp"):
                self.api.delete_maintenance(m["metadata"]["name"])
        checker = Checker(self.api, self.workload, self.tally)
        return checker.settled(timeout)

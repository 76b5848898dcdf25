"""The cluster around the operator: what a real one does by itself, as the simulation plays it, once a simulated second.

- the kubelet finishes a pod's graceful deletion once its grace has passed, makes a new pod Ready a few seconds
  after it was bound, and a Job's pod completes (phase Succeeded) a while after it was created;
- the ReplicaSet controller keeps each workload at its scale (a pod evicted is replaced at once, unready);
- the scheduler binds each new pod to a Ready, schedulable node whose NoSchedule taints it tolerates, the least busy
  first (then by name: one choice per state);
- the disruption controller counts every PodDisruptionBudget's pods again.

Every pass is a function of the objects and of how long the actor has seen them, on the monotonic clock (the loop's), as
a kubelet times a grace period: a wall-clock jump moves no timer here. Nothing here draws at random.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any

from node_maintenance.api.paths import BUDGETS, PODS, node_path, pod_path
from simulation import budgets, disruption
from simulation.apiserver import SimulatedApi

# How long after it is bound a pod becomes Ready, unless a history says otherwise (Cluster.ready_seconds).
READY_SECONDS = 5.0
# How long after it runs a Job's pod completes by itself.
JOB_SECONDS = 90.0
TICK_SECONDS = 1.0
Obj = dict[str, Any]


def _ready(node: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])


def _tolerates(pod: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("operator") == "Exists" and not toleration.get("key"):
            return True
        if toleration.get("key") == taint.get("key") and toleration.get("effect") in (None, taint.get("effect")):
            return True
    return False


def schedulable(node: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the scheduler may bind ``pod`` to ``node``: Ready, not cordoned, and every NoSchedule taint tolerated."""
    tolerates_all = any(t.get("operator") == "Exists" and not t.get("key") for t in (pod.get("spec") or {}).get("tolerations") or [])
    cordoned = bool((node.get("spec") or {}).get("unschedulable")) and not tolerates_all
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return _ready(node) and not cordoned and all(_tolerates(pod, t) for t in taints)


class Cluster:
    """The cluster's actors on one simulated API; ``workloads``: each ReplicaSet-owned workload's scale, by
    "namespace/name" (its pods are labelled app=<name>)."""

    def __init__(self, api: SimulatedApi) -> None:
        self.api = api
        self.workloads: dict[str, int] = {}
        self.ready_seconds = READY_SECONDS  # an image pulled slowly, a readiness probe that waits: longer recoveries
        self._created = 0
        self._noticed: dict[tuple[str, str], float] = {}  # (pod uid, what) → when first seen, on the monotonic clock
        self._done: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = {}  # an actor → what it last acted on, done

    async def run(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(TICK_SECONDS)

    def tick(self) -> None:
        now = asyncio.get_running_loop().time()
        pods = self.api.kept(PODS)
        uids = {p["metadata"]["uid"] for p in pods}
        self._noticed = {key: at for key, at in self._noticed.items() if key[0] in uids}
        self._finish_deletions(pods, now)
        self._unless_done("replace", lambda: self._replace(self.api.kept(PODS)))
        self._unless_done("schedule", lambda: self._schedule(self.api.kept(PODS), self.api.kept(node_path())))
        self._become_ready(self.api.kept(PODS), now)
        self._complete(self.api.kept(PODS), now)
        self._unless_done("count budgets", lambda: self._count_budgets(self.api.kept(PODS)))

    def _unless_done(self, actor: str, act: Callable[[], None]) -> None:
        """Let ``actor`` act unless the API and the workloads' scales are as it left them: an actor that reads neither
        the clock nor anything else has nothing to do then. Most of a history's seconds (its settling above all) are
        such, and the scheduler's and the budgets' work over every pod was most of a tick's cost."""
        if self._done.get(actor) == self._inputs():
            return
        act()
        self._done[actor] = self._inputs()

    def _inputs(self) -> tuple[int, tuple[tuple[str, int], ...]]:
        return self.api.revision, tuple(sorted(self.workloads.items()))

    def _for(self, pod: Obj, what: str, now: float) -> float:
        """How long this actor has seen ``what`` of ``pod``, on the monotonic clock (0 when it is first seen now)."""
        return now - self._noticed.setdefault((pod["metadata"]["uid"], what), now)

    # ------------------------------------------------ the kubelet
    def _finish_deletions(self, pods: list[Obj], now: float) -> None:
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and self._for(pod, "deleted", now) >= (meta.get("deletionGracePeriodSeconds") or 0):
                self.api.remove(pod_path(meta["namespace"], meta["name"]))

    def _become_ready(self, pods: list[Obj], now: float) -> None:
        for pod in pods:
            meta, status = pod["metadata"], pod.get("status") or {}
            bound = (pod.get("spec") or {}).get("nodeName")
            if bound and status.get("phase") == "Pending" and not meta.get("deletionTimestamp") and self._for(pod, "bound", now) >= self.ready_seconds:
                self.api.update(pod_path(meta["namespace"], meta["name"]), _running)

    def _complete(self, pods: list[Obj], now: float) -> None:
        for pod in pods:
            meta = pod["metadata"]
            if (pod.get("status") or {}).get("phase") == "Running" and _owner(pod) == ("Job", meta["labels"].get("app")) \
                    and self._for(pod, "running", now) >= JOB_SECONDS:
                self.api.update(pod_path(meta["namespace"], meta["name"]), _completed)

    # ------------------------------------------------ the controllers and the scheduler
    def _replace(self, pods: list[Obj]) -> None:
        for workload, scale in sorted(self.workloads.items()):
            namespace, name = workload.split("/")
            alive = [p for p in pods if p["metadata"]["namespace"] == namespace and (p["metadata"].get("labels") or {}).get("app") == name
                     and not p["metadata"].get("deletionTimestamp") and _owner(p) == ("ReplicaSet", name)]
            for _ in range(scale - len(alive)):
                self._created += 1
                self.api.create(pod_path(namespace, ""), new_pod(f"{name}-{self._created}", namespace, name))

    def _schedule(self, pods: list[Obj], nodes: list[Obj]) -> None:
        load = {n["metadata"]["name"]: 0 for n in nodes}
        for pod in pods:
            bound = (pod.get("spec") or {}).get("nodeName")
            if bound in load:
                load[bound] += 1
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            fitting = sorted((load[n["metadata"]["name"]], n["metadata"]["name"]) for n in nodes if schedulable(n, pod))
            if fitting:
                chosen = fitting[0][1]
                load[chosen] += 1
                self.api.update(pod_path(pod["metadata"]["namespace"], pod["metadata"]["name"]), functools.partial(_bound, node=chosen))

    def _count_budgets(self, pods: list[Obj]) -> None:
        for budget in self.api.kept(BUDGETS):
            status = disruption.budget_status(budget, [p for p in pods if budgets.covers(budget, p)], self._scale_of)
            if status != budget.get("status"):
                meta = budget["metadata"]
                self.api.update(f"/apis/policy/v1/namespaces/{meta['namespace']}/poddisruptionbudgets/{meta['name']}",
                                functools.partial(_with_status, status=status))

    def _scale_of(self, pod: Mapping[str, Any]) -> int | None:
        """The scale of the workload owning ``pod`` (None: a pod no workload of this cluster owns)."""
        owner = _owner(pod)
        return self.workloads.get(f"{pod['metadata']['namespace']}/{owner[1]}") if owner and owner[0] == "ReplicaSet" else None


def _with_status(obj: Obj, status: Obj) -> Obj:
    return {**obj, "status": status}


def _running(pod: Obj) -> Obj:
    return {**pod, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _completed(pod: Obj) -> Obj:
    return {**pod, "status": {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]}}


def _bound(pod: Obj, node: str) -> Obj:
    return {**pod, "spec": {**pod["spec"], "nodeName": node}}


def _owner(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("controller"):
            return str(owner.get("kind")), str(owner.get("name"))
    return None


def new_pod(name: str, namespace: str, workload: str, *, kind: str = "ReplicaSet", node: str | None = None,
            tolerations: list[Obj] | None = None) -> Obj:
    """A pod of ``workload`` (labelled app=<workload>, owned by its ``kind``), unbound unless ``node`` is given."""
    spec: Obj = {"containers": [{"name": "main", "image": "app"}], "terminationGracePeriodSeconds": 5}
    if node:
        spec["nodeName"] = node
    if tolerations:
        spec["tolerations"] = tolerations
    owner = {"apiVersion": "apps/v1", "kind": kind, "name": workload, "uid": f"uid-{kind}-{workload}", "controller": True}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": {"app": workload},
                                                           "ownerReferences": [owner]},
            "spec": spec, "status": {"phase": "Pending"}}

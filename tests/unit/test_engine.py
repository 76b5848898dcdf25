"""The drain engine and the policies at run time, against a fake API: a drain from start to Succeeded, a
conflict on the node patch, an answer lost on the way, and a policy's queue read without a write."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable
from typing import Any

from node_maintenance.api.paths import nm_path, node_path, pod_path
from node_maintenance.client.errors import Conflict, KubeError, Unreachable
from node_maintenance.drain import node as nodes
from node_maintenance.runtime.budgets import BudgetWatch
from node_maintenance.runtime.engine import Engine, Shared
from node_maintenance.runtime.metrics import Active
from node_maintenance.runtime.policies import Policies


class FakeApi:
    """Records every request; ``fail[(method, path)]`` makes the next such request raise that error."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.fail: dict[tuple[str, str], KubeError] = {}

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        self.calls.append((method, path, body))
        error = self.fail.pop((method, path), None)
        if error is not None:
            raise error
        return {}

    async def get(self, path: str) -> dict[str, Any] | None:
        await self.request("GET", path)
        return None

    async def patch(self, path: str, body: dict[str, Any], content_type: str = "") -> dict[str, Any]:
        return await self.request("PATCH", path, body=body)

    def writes(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path, _ in self.calls if method != "GET"]


def a_node(name: str = "n1", **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": {}, "annotations": {}, **metadata}, "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def a_pod(name: str, node: str = "n1", namespace: str = "app") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def an_nm(name: str = "nm1", node: str = "n1", created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenance",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1, "creationTimestamp": created},
            "spec": {"nodeName": node, "reason": "test"}}


def an_engine(api: FakeApi, body: dict[str, Any], node: dict[str, Any], pods: list[dict[str, Any]],
              events: list[tuple[str, str]]) -> Engine:
    def post(obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        events.append((obj.get("kind", "NodeMaintenance"), reason))

    shared = Shared(api, BudgetWatch(api), Active(), "v1beta1", post)  # type: ignore[arg-type]
    engine = Engine(shared, lambda: body, logging.LoggerAdapter(logging.getLogger("test"), {}), exists=lambda _: False)
    engine.node.objects = {f"/{node['metadata']['name']}": node}
    engine.pods.objects = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    return engine


def run(coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(coroutine())


def test_a_drain_goes_from_start_to_succeeded_through_the_plan_alone() -> None:
    api, events = FakeApi(), []
    node, pod = a_node(), a_pod("web-0")
    engine = an_engine(api, an_nm(), node, [pod], events)

    async def scenario() -> None:
        await engine.step()
        assert api.writes() == [("PATCH", node_path("n1")), ("POST", pod_path("app", "web-0") + "/eviction"),
                                ("PATCH", nm_path("nm1", subresource="status"))]
        assert api.calls[-1][2]["status"]["phase"] == "Running"
        assert ("NodeMaintenance", "BeginMaintenance") in events
        # The watches show what the first step did: the node taken, the pod gone.
        taken = {**node, "metadata": {**node["metadata"], "annotations": {nodes.HOLDER: "nm1"}}, "spec": {"unschedulable": True,
                 "taints": [{"key": "kubevirt.io/drain", "effect": "NoSchedule"}]}}
        engine.node.objects = {"/n1": taken}
        engine.pods.objects = {}
        api.calls.clear()
        assert await engine.step() is None  # drained: nothing to look at until something changes
        assert api.writes() == [("PATCH", nm_path("nm1", subresource="status"))]
        assert api.calls[-1][2]["status"]["phase"] == "Succeeded"
        assert ("NodeMaintenance", "SucceedMaintenance") in events
        assert engine.memory.attempts == {}

    run(scenario)


def test_a_conflict_on_the_node_patch_sends_nothing_else_and_counts_nothing() -> None:
    api, events = FakeApi(), []
    engine = an_engine(api, an_nm(), a_node(), [a_pod("web-0")], events)
    api.fail[("PATCH", node_path("n1"))] = Conflict(409, "Conflict", "the object has been modified")

    async def scenario() -> None:
        assert await engine.step() is None  # the node watch brings the node that changed
        assert api.writes() == [("PATCH", node_path("n1"))]
        assert events == [] and engine.memory.attempts == {}
        assert engine.shared.budgets.in_flight() == {}

    run(scenario)


def test_an_answer_lost_on_the_way_keeps_every_other_outcome_of_the_batch() -> None:
    api, events = FakeApi(), []
    engine = an_engine(api, an_nm(), a_node(), [a_pod("web-0"), a_pod("web-1")], events)
    api.fail[("POST", pod_path("app", "web-1") + "/eviction")] = Unreachable("connection reset by peer")

    async def scenario() -> None:
        recheck = await engine.step()
        attempts = engine.memory.attempts
        assert attempts["uid-web-0"].accepted
        assert not attempts["uid-web-1"].accepted and "connection reset" in attempts["uid-web-1"].error
        assert recheck is not None and recheck > 0  # the failed one is tried again after its backoff
        assert ("PATCH", nm_path("nm1", subresource="status")) in api.writes()  # the status was still written

    run(scenario)


def test_a_queued_maintenance_is_told_to_wait_and_the_gate_writes_nothing() -> None:
    api = FakeApi()
    policies = Policies(api, "operator-ns", lambda: None)  # type: ignore[arg-type]
    policies.served = True
    policy = {"metadata": {"name": "pool", "generation": 1}, "spec": {"nodeSelector": {"matchLabels": {"pool": "a"}}, "maxParallel": 1}}
    pool = [a_node(f"n{i}", labels={"pool": "a"}) for i in (1, 2)]
    pool[0]["metadata"]["annotations"] = {nodes.HOLDER: "first"}
    first, second = an_nm("first", "n1"), an_nm("second", "n2", created="2026-01-01T00:01:00Z")

    class Listed:
        def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
            self.objects = objects

    policies._mirrors = {"policies": Listed({"/pool": policy}), "nodes": Listed({f"/{n['metadata']['name']}": n for n in pool}),  # type: ignore[dict-item]
                         "maintenances": Listed({"/first": first, "/second": second}), "jobs": Listed({})}
    gate = policies.gate(second, pool[1], datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), {})
    assert gate.waiting is not None and gate.waiting.node_patch is None and not gate.waiting.removals
    queued = next(c for c in gate.waiting.status["conditions"] if c["type"] == "Queued")
    assert (queued["status"], queued["reason"]) == ("True", "WaitingForSlot")
    assert api.calls == []  # the gate only reads

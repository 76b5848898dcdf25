"""The drain engine against a fake API: a drain from start to Succeeded, a conflict on the node patch, and
an answer lost on the way."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from node_maintenance.api.paths import lease_path, nm_path, node_path, pod_path
from node_maintenance.client.errors import Conflict, Unreachable
from node_maintenance.drain import node as nodes
from node_maintenance.runtime.budgets import BudgetWatch
from node_maintenance.runtime.engine import Engine, Shared
from node_maintenance.runtime.metrics import Active
from tests.unit.builders import FakeApi, runtime_nm, runtime_node, runtime_pod


def an_engine(api: FakeApi, body: dict[str, Any], node: dict[str, Any], pods: list[dict[str, Any]],
              events: list[tuple[str, str]], lease_namespace: str = "") -> Engine:
    def post(obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        events.append((obj.get("kind", "NodeMaintenance"), reason))

    shared = Shared(api, BudgetWatch(api), Active(), "v1beta1", post, lease_namespace=lease_namespace)  # type: ignore[arg-type]
    engine = Engine(shared, lambda: body, logging.LoggerAdapter(logging.getLogger("test"), {}), exists=lambda _: False)
    engine.node.objects = {f"/{node['metadata']['name']}": node}
    engine.pods.objects = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    return engine


def taken(node: dict[str, Any], holder: str = "nm1") -> dict[str, Any]:
    """``node`` as its watch shows it once the maintenance ``holder`` took it."""
    return {**node, "metadata": {**node["metadata"], "annotations": {nodes.HOLDER: holder}},
            "spec": {"unschedulable": True, "taints": [{"key": "kubevirt.io/drain", "effect": "NoSchedule"}]}}


def run(coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(coroutine())


def test_a_drain_goes_from_start_to_succeeded_through_the_plan_alone() -> None:
    api, events = FakeApi(), []
    node, pod = runtime_node(), runtime_pod("web-0")
    engine = an_engine(api, runtime_nm("nm1"), node, [pod], events)

    async def scenario() -> None:
        await engine.step()
        assert api.writes() == [("PATCH", node_path("n1")), ("POST", pod_path("app", "web-0") + "/eviction"),
                                ("PATCH", nm_path("nm1", subresource="status"))]
        assert api.calls[-1][2]["status"]["phase"] == "Running"
        assert ("NodeMaintenance", "BeginMaintenance") in events
        # The watches show what the first step did: the node taken, the pod gone.
        engine.node.objects = {"/n1": taken(node)}
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
    engine = an_engine(api, runtime_nm("nm1"), runtime_node(), [runtime_pod("web-0")], events)
    api.fail("PATCH", node_path("n1"), Conflict(409, "Conflict", "the object has been modified"))

    async def scenario() -> None:
        assert await engine.step() is None  # the node watch brings the node that changed
        assert api.writes() == [("PATCH", node_path("n1"))]
        assert events == [] and engine.memory.attempts == {}
        assert engine.shared.budgets.in_flight() == {}

    run(scenario)


def test_an_answer_lost_on_the_way_keeps_every_other_outcome_of_the_batch() -> None:
    api, events = FakeApi(), []
    engine = an_engine(api, runtime_nm("nm1"), runtime_node(), [runtime_pod("web-0"), runtime_pod("web-1")], events)
    api.fail("POST", pod_path("app", "web-1") + "/eviction", Unreachable("connection reset by peer"))

    async def scenario() -> None:
        recheck = await engine.step()
        attempts = engine.memory.attempts
        assert attempts["uid-web-0"].accepted
        assert not attempts["uid-web-1"].accepted and "connection reset" in attempts["uid-web-1"].error
        assert recheck is not None and recheck > 0  # the failed one is tried again after its backoff
        assert ("PATCH", nm_path("nm1", subresource="status")) in api.writes()  # the status was still written

    run(scenario)


def test_a_status_someone_else_wrote_is_written_again_after_a_lease_claimed_first() -> None:
    """The first step only claims the remediation Lease and writes no status: that unwritten (empty) status
    must not count as one of ours, or every status anyone writes would look like ours."""
    api, events = FakeApi(), []
    node, body = runtime_node(), runtime_nm("nm1")
    engine = an_engine(api, body, node, [runtime_pod("web-0")], events, lease_namespace="leases")

    async def scenario() -> None:
        await engine.step()
        assert api.writes() == [("POST", lease_path("leases"))]  # the claim alone, no status
        await engine.step()
        truth = api.calls_to("PATCH", nm_path("nm1", subresource="status"))[-1].body["status"]
        assert truth["phase"] == "Running"
        body["status"] = truth  # the watch shows our write
        engine.node.objects = {"/n1": taken(node)}
        await engine.step()
        api.calls.clear()
        body["status"] = {**truth, "phase": "Succeeded", "pendingPods": [], "pendingPodsRefs": []}  # someone else's
        await engine.step()
        (rewritten,) = api.calls_to("PATCH", nm_path("nm1", subresource="status"))
        assert rewritten.body["status"]["phase"] == "Running" and rewritten.body["status"]["pendingPods"] == ["web-0"]

    run(scenario)

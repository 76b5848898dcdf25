"""The simulated API server answers the operator's own client code as kube-apiserver does: a Mirror lists and
watches it (objects leaving a selection, a compacted history, a server restart), a stale patch is refused, status is
written only through /status, finalizers keep a deleted object, evictions honour budgets, and a fault drawn is
what the operator sees."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from node_maintenance.api.paths import BUDGETS, PODS, nm_path, node_path, pod_path
from node_maintenance.client.errors import Conflict, NotFound, ServerError, TooManyRequests, Unreachable
from node_maintenance.client.watch import Mirror
from simulation.apiserver import Fault, SimulatedApi
from tests.unit.builders import budget, nm, node, pod

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def api(faults: Callable[[str, str], Fault] | None = None) -> SimulatedApi:
    return SimulatedApi(lambda: NOW, faults) if faults else SimulatedApi(lambda: NOW)


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), 10))


def budget_path(namespace: str) -> str:
    return f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"


def ready_pod(name: str, **fields: Any) -> dict[str, Any]:
    return pod(name, namespace="app", labels={"app": "web"}, node="n1", **fields)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_mirror_follows_a_selection_as_objects_enter_and_leave_it() -> None:
    async def body() -> None:
        server = api()
        server.create(node_path(), node("n1", spec={}))
        seen: list[str | None] = []
        mirror = Mirror(server, node_path(), seen.append, field_selector="spec.unschedulable=true", from_cache=False)
        task = asyncio.create_task(mirror.run())
        await mirror.synced.wait()
        assert mirror.objects == {}
        server.update(node_path("n1"), lambda n: {**n, "spec": {"unschedulable": True}})
        await settle()
        assert list(mirror.objects) == ["/n1"]
        server.update(node_path("n1"), lambda n: {**n, "spec": {}})
        await settle()
        assert mirror.objects == {} and seen == [None, "/n1", "/n1"]
        task.cancel()
    run(body)


def test_a_watch_resumes_after_a_server_restart_and_lists_again_after_compaction() -> None:
    async def body() -> None:
        server = api()
        mirror = Mirror(server, PODS, lambda _key: None, field_selector="spec.nodeName=n1", from_cache=False)
        task = asyncio.create_task(mirror.run())
        await mirror.synced.wait()
        server.drop_watches()
        server.create(pod_path("app", ""), ready_pod("a"))
        await settle()
        assert list(mirror.objects) == ["app/a"]
        server.compact()
        server.drop_watches()
        server.create(pod_path("app", ""), ready_pod("b"))
        server.remove(pod_path("app", "a"))
        server.compact()
        await asyncio.sleep(0.6)  # the watch's retry after its failure: then the listing
        assert list(mirror.objects) == ["app/b"]
        task.cancel()
    run(body)


def test_a_patch_of_a_changed_object_is_refused_and_status_is_written_only_through_its_subresource() -> None:
    async def body() -> None:
        server = api()
        stored = server.create(nm_path(), nm("m", "n1", uid="u"))
        version = stored["metadata"]["resourceVersion"]
        await server.patch(nm_path("m"), {"metadata": {"labels": {"a": "b"}, "resourceVersion": version}, "status": {"phase": "Running"}})
        shown = server.get_object(nm_path("m"))
        assert shown is not None and shown["metadata"]["labels"] == {"a": "b"} and "phase" not in (shown.get("status") or {})
        with pytest.raises(Conflict):
            await server.patch(nm_path("m"), {"metadata": {"labels": {"c": "d"}, "resourceVersion": version}})
        await server.patch(nm_path("m", subresource="status"), {"status": {"phase": "Running"}, "spec": {"nodeName": "other"}})
        shown = server.get_object(nm_path("m"))
        assert shown is not None and shown["status"]["phase"] == "Running" and shown["spec"]["nodeName"] == "n1"
        assert shown["metadata"]["generation"] == 1  # neither write changed the spec
    run(body)


def test_a_finalizer_keeps_a_deleted_object_until_it_is_removed() -> None:
    async def body() -> None:
        server = api()
        server.create(nm_path(), nm("m", "n1", finalizers=["keep"]))
        await server.request("DELETE", nm_path("m"))
        kept = server.get_object(nm_path("m"))
        assert kept is not None and kept["metadata"]["deletionTimestamp"]
        await server.patch(nm_path("m"), {"metadata": {"finalizers": None}})
        assert server.get_object(nm_path("m")) is None
        with pytest.raises(NotFound):
            await server.request("GET", nm_path("m"))
    run(body)


def test_an_eviction_uses_up_the_budget_and_the_next_is_refused_as_the_eviction_api_refuses() -> None:
    async def body() -> None:
        server = api()
        server.create(budget_path("app"), budget("web", namespace="app", labels={"app": "web"}, minAvailable=1,
                                                 status={"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "observedGeneration": 1}))
        for name in ("a", "b"):
            server.create(pod_path("app", ""), ready_pod(name))
        await server.request("POST", pod_path("app", "a") + "/eviction", body={"apiVersion": "policy/v1", "kind": "Eviction"})
        evicted = server.get_object(pod_path("app", "a"))
        assert evicted is not None and evicted["metadata"]["deletionTimestamp"]  # graceful: the kubelet finishes it
        with pytest.raises(TooManyRequests) as refused:
            await server.request("POST", pod_path("app", "b") + "/eviction", body={"apiVersion": "policy/v1", "kind": "Eviction"})
        assert refused.value.by_budget
        listed = await server.request("GET", BUDGETS)
        assert listed["items"][0]["status"]["disruptionsAllowed"] == 0 and "a" in listed["items"][0]["status"]["disruptedPods"]
    run(body)


def test_a_fault_drawn_is_what_the_operator_sees_and_a_lost_answer_was_applied() -> None:
    async def body() -> None:
        faults = iter([Fault.REFUSED, Fault.LOST, Fault.NONE])
        server = api(lambda _method, _path: next(faults))
        server.create(node_path(), node("n1", spec={}))
        with pytest.raises(ServerError):
            await server.patch(node_path("n1"), {"spec": {"unschedulable": True}})
        assert not (server.get_object(node_path("n1")) or {})["spec"]
        with pytest.raises(Unreachable):
            await server.patch(node_path("n1"), {"spec": {"unschedulable": True}})
        assert (server.get_object(node_path("n1")) or {})["spec"] == {"unschedulable": True}
        assert [(w.method, w.applied) for w in server.writes] == [("PATCH", True)]
    run(body)


def test_a_listing_counts_as_the_operator_s_only_once_it_had_the_answer() -> None:
    """What the judge takes as the operator's first listing (``Step.listed``): not one refused, nor one whose answer was lost."""
    async def body() -> None:
        faults = iter([Fault.REFUSED, Fault.LOST, Fault.NONE, Fault.NONE])
        server = api(lambda _method, _path: next(faults))
        for _ in range(2):
            with pytest.raises((ServerError, Unreachable)):
                await server.request("GET", node_path())
        server.create(node_path(), node("n1", spec={}))
        await server.request("GET", node_path())
        await server.get(node_path("n1"))
        assert server.listed == [(node_path(), server.revision)]
    run(body)


def test_a_late_write_is_carried_out_after_the_caller_gave_up_against_what_is_stored_then() -> None:
    async def body() -> None:
        faults = iter([Fault.LATE, Fault.LATE, Fault.NONE])
        server = api(lambda _method, _path: next(faults))
        server.late_seconds = 0.05
        server.create(node_path(), node("n1", spec={}))
        version = (server.get_object(node_path("n1")) or {})["metadata"]["resourceVersion"]
        with pytest.raises(Unreachable):  # a stale resourceVersion by the time it is carried out: refused then
            await server.patch(node_path("n1"), {"metadata": {"resourceVersion": version}, "spec": {"unschedulable": True}})
        with pytest.raises(Unreachable):
            await server.patch(node_path("n1"), {"metadata": {"labels": {"late": "yes"}}})
        assert server.writes == [] and not (server.get_object(node_path("n1")) or {})["spec"]  # nothing applied yet
        server.update(node_path("n1"), lambda n: {**n, "metadata": {**n["metadata"], "labels": {"edited": "yes"}}})
        await asyncio.sleep(0.1)
        kept = server.get_object(node_path("n1")) or {}
        assert not kept["spec"] and kept["metadata"]["labels"] == {"edited": "yes", "late": "yes"}
        assert [(w.method, w.applied) for w in server.writes] == [("PATCH", False), ("PATCH", True)]
        assert [w.sent for w in server.writes] == [int(version)] * 2  # each dated by the revision it was sent at
        assert [w.revision for w in server.writes] == [int(version) + 1, int(version) + 2]  # refused after the edit, applied after it
    run(body)


def test_what_the_operator_was_told_of_a_collection_moves_with_its_listing_and_its_watch_unless_silent() -> None:
    async def body() -> None:
        server = api()
        server.create(node_path(), node("n1", spec={}))
        listed = int((await server.request("GET", node_path()))["metadata"]["resourceVersion"])
        assert server.told == {node_path(): listed}
        events: list[str] = []

        async def watch() -> None:
            async for event in server.watch(node_path(), {"resourceVersion": str(listed)}):
                events.append(event["object"]["metadata"]["name"])

        watching = asyncio.create_task(watch())
        await asyncio.sleep(0.01)  # the watch open and current
        server.silent = True
        server.create(node_path(), node("n2", spec={}))
        await asyncio.sleep(0.01)
        assert events == [] and server.told == {node_path(): listed}  # a silent watch brings nothing
        server.silent = False
        server.create(node_path(), node("n3", spec={}))
        await asyncio.sleep(0.01)
        assert events == ["n2", "n3"] and server.told == {node_path(): server.revision}
        watching.cancel()
    run(body)

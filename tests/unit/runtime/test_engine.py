"""The drain engine against a fake API: a drain from start to Succeeded, a conflict on the node patch, an
answer lost on the way, and the DaemonSets its pods name, each read once (in doubt, its pods stay)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest

from node_maintenance.api.paths import daemonset_path, lease_path, nm_path, node_path, pod_path
from node_maintenance.client.errors import Conflict, NotFound, Unreachable
from node_maintenance.coordination.remediation import lease_name
from node_maintenance.drain import nodes
from node_maintenance.drain.memory import ERROR_RETRY_SECONDS, WatchMode
from node_maintenance.runtime.budget_watch import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.daemonsets import DaemonSetLookup
from node_maintenance.runtime.drain_watches import LATE_PODS_SECONDS
from node_maintenance.runtime.engine import Engine, Shared
from node_maintenance.runtime.metrics import Active
from tests.unit.builders import FakeApi, daemonset, own_node, own_pods, runtime_nm, runtime_node, runtime_pod, stand_in_watches


def an_engine(api: FakeApi, body: dict[str, Any], node: dict[str, Any], pods: list[dict[str, Any]],
              events: list[tuple[str, str]], lease_namespace: str = "") -> Engine:
    def post(obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        events.append((obj.get("kind", "NodeMaintenance"), reason))

    shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), "v1beta1", post,
                    lease_namespace=lease_namespace)
    engine = Engine(shared, lambda: body, logging.LoggerAdapter(logging.getLogger("test"), {}), exists=lambda _: False)
    stand_in_watches(engine, node, pods)
    return engine


def taken(node: dict[str, Any], holder: str = "nm1") -> dict[str, Any]:
    """``node`` as its watch shows it once the maintenance ``holder`` took it."""
    return {**node, "metadata": {**node["metadata"], "annotations": {nodes.HOLDER: holder}},
            "spec": {"unschedulable": True, "taints": [{"key": "kubevirt.io/drain", "effect": "NoSchedule"}]}}


async def drained(api: FakeApi, engine: Engine, node: dict[str, Any]) -> None:
    """The engine as it is once its drain has succeeded: its own watches ended, and the cordoned nodes' watch (which
    another drained maintenance started) showing its node."""
    api.objects[node_path(node["metadata"]["name"])] = node
    engine.shared.cordoned.subscribe("n0", lambda: None)
    await engine.shared.cordoned.mirror.synced.wait()
    engine.wanted = WatchMode.DRAINED
    await engine.watch(WatchMode.DRAINED)
    api.calls.clear()


def a_drained_engine() -> tuple[FakeApi, Engine, dict[str, Any]]:
    """A maintenance whose drain has succeeded, on a node it holds with no pods left (``drained`` makes it so)."""
    api, node = FakeApi(), taken(runtime_node())
    return api, an_engine(api, runtime_nm("nm1", status={"phase": "Succeeded"}), node, [], []), node


def wanted(engine: Engine) -> WatchMode:
    """What the engine's last step wants watched (read anew: a step changes it)."""
    return engine.wanted


def run(coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(coroutine())


def test_a_drain_goes_from_start_to_succeeded_through_the_plan_alone() -> None:
    api, events = FakeApi(), list[tuple[str, str]]()
    node, pod = runtime_node(), runtime_pod("web-0")
    engine = an_engine(api, runtime_nm("nm1"), node, [pod], events)

    async def scenario() -> None:
        await engine.step()
        assert api.writes() == [("PATCH", node_path("n1")), ("PATCH", nm_path("nm1", subresource="status")),
                                ("POST", pod_path("app", "web-0") + "/eviction")]
        assert api.calls_to("PATCH", nm_path("nm1", subresource="status"))[-1].body["status"]["phase"] == "Running"
        assert ("NodeMaintenance", "BeginMaintenance") in events
        # The watches show what the first step did: the node taken, the pod gone.
        own_node(engine).objects = {"/n1": taken(node)}
        own_pods(engine).objects = {}
        api.calls.clear()
        # Drained: its own watches end; the watch of cordoned nodes all drained maintenances share shows the node, and
        # the node's pods are listed again now and then, for pods bound to it later.
        assert await engine.step() == LATE_PODS_SECONDS and engine.wanted == WatchMode.DRAINED
        assert api.writes() == [("PATCH", nm_path("nm1", subresource="status"))]
        assert api.calls[-1][2]["status"]["phase"] == "Succeeded"
        assert ("NodeMaintenance", "SucceedMaintenance") in events
        assert engine.memory.attempts == {}
        await drained(api, engine, taken(node))
        # The pod watch was current until then: a step for another reason (its own status coming back, say) lists nothing.
        api.objects[pod_path("app", "late-0")] = runtime_pod("late-0")
        api.calls.clear()
        delay = await engine.step()
        assert delay is not None and 0 < delay <= LATE_PODS_SECONDS and not [c for c in api.calls if c.method == "GET"]
        # A pod bound to the drained node later is found by the listing after a change of the node (or after
        # LATE_PODS_SECONDS), and the drain watches its pods again.
        engine.shared.cordoned.mirror.on_change("/n1")
        api.calls.clear()
        await engine.step()
        assert api.calls[0].method == "GET" and (api.calls[0].query or {}).get("fieldSelector") == "spec.nodeName=n1"
        assert ("POST", pod_path("app", "late-0") + "/eviction") in api.writes() and wanted(engine) == WatchMode.NODE_AND_PODS

    run(scenario)


def test_a_drained_node_s_pods_are_listed_again_once_late_pods_seconds_have_passed() -> None:
    api, engine, node = a_drained_engine()

    async def scenario() -> None:
        await drained(api, engine, node)
        await engine.step()
        assert not [c for c in api.calls if c.method == "GET"]
        engine.watches.pods_listed -= LATE_PODS_SECONDS
        await engine.step()
        assert [(c.query or {})["fieldSelector"] for c in api.calls if c.method == "GET"] == ["spec.nodeName=n1"]

    run(scenario)


def test_a_step_for_another_reason_does_not_put_off_a_drained_node_s_next_listing() -> None:
    """Woken a second before its pods are due to be listed (a Lease renewal due then), a drained maintenance looks
    again at that second, not a whole interval later: a pod bound to the node meanwhile waited up to twice as long."""
    api, engine, node = a_drained_engine()

    async def scenario() -> None:
        await drained(api, engine, node)
        engine.watches.pods_listed -= LATE_PODS_SECONDS - 1
        delay = await engine.step()
        assert delay is not None and delay <= 1 and not [c for c in api.calls if c.method == "GET"]

    run(scenario)


def test_a_drained_node_no_longer_cordoned_is_watched_by_its_drain_again_and_one_unknown_holds() -> None:
    api, engine, node = a_drained_engine()

    async def scenario() -> None:
        await drained(api, engine, node)
        engine.shared.cordoned.mirror.failure = "connection reset by peer"
        api.calls.clear()
        assert await engine.step() == ERROR_RETRY_SECONDS and api.calls == [] and engine.wanted == WatchMode.DRAINED
        engine.shared.cordoned.mirror.failure = ""
        engine.shared.cordoned.mirror.objects.clear()  # someone uncordoned it
        assert await engine.step() == 0.0 and api.calls == [] and wanted(engine) == WatchMode.NODE_AND_PODS

    run(scenario)


def test_a_conflict_on_the_node_patch_sends_nothing_else_and_counts_nothing() -> None:
    api, events = FakeApi(), list[tuple[str, str]]()
    engine = an_engine(api, runtime_nm("nm1"), runtime_node(), [runtime_pod("web-0")], events)
    api.fail("PATCH", node_path("n1"), Conflict(409, "Conflict", "the object has been modified"))

    async def scenario() -> None:
        assert await engine.step() is None  # the node watch brings the node that changed
        assert api.writes() == [("PATCH", node_path("n1"))]
        assert events == [] and engine.memory.attempts == {}
        assert engine.shared.budgets.in_flight() == {}

    run(scenario)


def test_an_answer_lost_on_the_way_keeps_every_other_outcome_of_the_batch() -> None:
    api, events = FakeApi(), list[tuple[str, str]]()
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


def test_a_node_is_taken_in_the_step_that_first_claims_its_lease() -> None:
    """A slot freed is taken again in one step and three requests: the Lease read, claimed, and the node taken."""
    api, events = FakeApi(), list[tuple[str, str]]()
    engine = an_engine(api, runtime_nm("nm1"), runtime_node(), [runtime_pod("web-0")], events, lease_namespace="leases")

    async def scenario() -> None:
        await engine.step()
        assert [(c.method, c.path) for c in api.calls][:3] == [("GET", lease_path("leases", lease_name("n1"))), ("POST", lease_path("leases")),
                                                              ("PATCH", node_path("n1"))]

    run(scenario)


def test_a_node_is_not_taken_while_every_claim_of_its_lease_is_raced() -> None:
    """A claim another writer raced takes nothing, and neither does the next one that is raced too: the node is taken
    only right after a claim that held."""
    api, events = FakeApi(), list[tuple[str, str]]()
    engine = an_engine(api, runtime_nm("nm1"), runtime_node(), [runtime_pod("web-0")], events, lease_namespace="leases")
    api.fail("POST", lease_path("leases"), Conflict(409, "Conflict", "leases.coordination.k8s.io \"node-n1\" already exists"), times=2)

    async def scenario() -> None:
        await engine.step()
        await engine.step()
        assert api.writes() == [("POST", lease_path("leases"))] * 2  # raced twice: the node untouched
        await engine.step()
        assert api.writes()[2:4] == [("POST", lease_path("leases")), ("PATCH", node_path("n1"))]

    run(scenario)


def test_a_claim_whose_answer_never_came_takes_nothing() -> None:
    """A claim of the Lease that met no answer (a hung connection, a reset) may or may not hold: the step goes no
    further, and the node is taken by a later step, after a claim that held."""
    api, events = FakeApi(), list[tuple[str, str]]()
    engine = an_engine(api, runtime_nm("nm1"), runtime_node(), [runtime_pod("web-0")], events, lease_namespace="leases")
    api.fail("POST", lease_path("leases"), Unreachable("connection reset by peer"))

    async def scenario() -> None:
        with pytest.raises(Unreachable):  # the engine's loop logs it and steps again after ERROR_RETRY_SECONDS
            await engine.step()
        assert api.writes() == [("POST", lease_path("leases"))]
        await engine.step()
        assert api.writes()[1:3] == [("POST", lease_path("leases")), ("PATCH", node_path("n1"))]

    run(scenario)


def test_a_status_someone_else_wrote_is_written_again_after_a_lease_claimed_first() -> None:
    """A first claim that another writer raced takes nothing and writes no status: that unwritten (empty) status
    must not count as one of ours, or every status anyone writes would look like ours."""
    api, events = FakeApi(), list[tuple[str, str]]()
    node, body = runtime_node(), runtime_nm("nm1")
    engine = an_engine(api, body, node, [runtime_pod("web-0")], events, lease_namespace="leases")
    api.fail("POST", lease_path("leases"), Conflict(409, "Conflict", "leases.coordination.k8s.io \"node-n1\" already exists"))

    async def scenario() -> None:
        await engine.step()
        assert api.writes() == [("POST", lease_path("leases"))]  # the claim alone, raced: no node, no status
        await engine.step()
        truth = api.calls_to("PATCH", nm_path("nm1", subresource="status"))[-1].body["status"]
        assert truth["phase"] == "Running"
        body["status"] = truth  # the watch shows our write
        own_node(engine).objects = {"/n1": taken(node)}
        await engine.step()
        api.calls.clear()
        body["status"] = {**truth, "phase": "Succeeded", "pendingPods": [], "pendingPodsRefs": []}  # someone else's
        await engine.step()
        (rewritten,) = api.calls_to("PATCH", nm_path("nm1", subresource="status"))
        assert rewritten.body["status"]["phase"] == "Running" and rewritten.body["status"]["pendingPods"] == ["web-0"]

    run(scenario)


def test_daemonset_pods_go_by_what_a_read_of_their_daemonset_says() -> None:
    api, events = FakeApi({daemonset_path("app", "agent"): daemonset("agent", namespace="app")}), list[tuple[str, str]]()
    node = runtime_node()
    node_pods = [runtime_pod("agent-n1", owner="DaemonSet", owner_name="agent"), runtime_pod("orphan", owner="DaemonSet", owner_name="gone"),
                 runtime_pod("spent", owner="DaemonSet", owner_name="done", phase="Succeeded")]
    engine = an_engine(api, runtime_nm("nm1"), node, node_pods, events)

    async def scenario() -> None:
        await engine.step()
        # Read: the two DaemonSets of unfinished pods, not the finished pod's.
        assert sorted(c.path for c in api.calls_to("GET")) == [daemonset_path("app", "agent"), daemonset_path("app", "gone")]
        assert api.writes() == [("PATCH", node_path("n1")), ("PATCH", nm_path("nm1", subresource="status")),
                                ("POST", pod_path("app", "orphan") + "/eviction"), ("DELETE", pod_path("app", "spent"))]
        assert api.calls_to("PATCH", nm_path("nm1", subresource="status"))[-1].body["status"]["pendingPods"] == ["orphan", "spent"]
        own_node(engine).objects = {"/n1": taken(node)}
        api.calls.clear()
        await engine.step()
        # One found is known for the rest of the maintenance; one not found is read again while a pod names it.
        assert [c.path for c in api.calls_to("GET")] == [daemonset_path("app", "gone")]
        own_pods(engine).objects = {"app/agent-n1": node_pods[0]}  # the watch shows the orphan and the finished pod gone
        api.calls.clear()
        await engine.step()
        assert api.calls_to("GET") == []

    run(scenario)


def test_a_daemonset_that_could_not_be_read_keeps_its_pods_and_is_read_again() -> None:
    api, events = FakeApi(), list[tuple[str, str]]()
    node = runtime_node()
    engine = an_engine(api, runtime_nm("nm1"), node, [runtime_pod("orphan", owner="DaemonSet", owner_name="gone")], events)
    api.fail("GET", daemonset_path("app", "gone"), Unreachable("connection reset by peer"))

    async def scenario() -> None:
        assert await engine.step() == ERROR_RETRY_SECONDS  # the read is tried again soon, though nothing changes
        assert api.writes() == [("PATCH", node_path("n1")), ("PATCH", nm_path("nm1", subresource="status"))]  # nothing evicted
        status = api.calls_to("PATCH", nm_path("nm1", subresource="status"))[-1].body["status"]
        assert status["evictionPods"] == 0 and status["pendingPods"] == []  # nor reported as going
        own_node(engine).objects = {"/n1": taken(node)}
        api.calls.clear()
        await engine.step()
        assert ("POST", pod_path("app", "orphan") + "/eviction") in api.writes()  # read now: gone, so evicted

    run(scenario)


def test_a_daemonset_made_anew_under_the_name_of_one_not_found_keeps_the_pods_it_starts() -> None:
    """A replace (delete, create) seen halfway: the pods the new DaemonSet starts are its own, not orphans."""
    api = FakeApi()
    lookup = DaemonSetLookup(api)
    node_pods = [runtime_pod("agent-n1", owner="DaemonSet", owner_name="agent")]
    assert asyncio.run(lookup.read(node_pods)) == {"app/agent": False}
    api.objects[daemonset_path("app", "agent")] = daemonset("agent", namespace="app")
    assert asyncio.run(lookup.read(node_pods)) == {"app/agent": True}
    api.calls.clear()
    assert asyncio.run(lookup.read(node_pods)) == {"app/agent": True} and api.calls == []


def test_a_status_the_server_could_not_take_is_written_again_after_a_pause_not_at_once() -> None:
    # The API server restarting: a step whose status write failed must not be run again at once, in a loop.
    api, events = FakeApi(), list[tuple[str, str]]()
    node = taken(runtime_node())
    engine = an_engine(api, runtime_nm("nm1"), node, [runtime_pod("web-0")], events)
    engine.memory = dataclasses.replace(engine.memory, written_at=-1000.0)  # the last write long ago: a status is due
    api.fail("PATCH", nm_path("nm1", subresource="status"), Unreachable("Cannot connect to host"), times=2)

    async def scenario() -> None:
        assert await engine.step() == ERROR_RETRY_SECONDS
        assert await engine.step() == ERROR_RETRY_SECONDS  # still due, still not sent: a pause again
        assert await engine.step() is not None and api.calls_to("PATCH", nm_path("nm1", subresource="status"))[-1]

    run(scenario)


NAMED = {"kind": "nodemaintenances", "name": "nm1"}


@pytest.mark.parametrize(("details", "readable", "gone"), [(NAMED, False, True), ({}, False, False), (NAMED, True, False)])
def test_a_maintenance_is_gone_when_the_api_says_so_by_name_and_a_read_finds_none(details: dict[str, str], readable: bool,
                                                                                  gone: bool) -> None:
    """The soak's seed 1795887490: a NodeMaintenance went without the deletion our finalizer guards, its drain took the
    node and met a 404 on every status write since, for good. A 404 that names no object is a version the server does
    not serve (yet); one naming the object it can still read is a status subresource not enabled: the drain goes on."""
    api = FakeApi({nm_path("nm1", version="v1beta1"): runtime_nm("nm1")} if readable else {})
    engine = an_engine(api, runtime_nm("nm1"), runtime_node(), [], [])
    api.fail("PATCH", nm_path("nm1", subresource="status"), NotFound(404, "NotFound", 'nodemaintenances "nm1" not found', details))

    async def scenario() -> None:
        await engine.step()
        assert api.writes()[0] == ("PATCH", node_path("n1"))  # it took the node
        assert engine.gone is gone

    run(scenario)


TIMED_OUT = {"phase": "Failed", "drainStartTime": "2020-01-01T00:00:00Z", "lastError": "drain timed out after 1s",
             "conditions": [{"type": "TimedOut", "status": "True", "reason": "HandedBack", "message": "drain timed out after 1s"}]}


def test_a_maintenance_timed_out_gives_its_node_back_once_its_status_says_so_and_never_takes_it_again() -> None:
    api, events = FakeApi(), list[tuple[str, str]]()
    node = taken(runtime_node())
    drain = {"timeoutSeconds": 1, "onTimeout": "HandBack"}
    body = runtime_nm("nm1", drain=drain, status={"phase": "Running", "drainStartTime": "2020-01-01T00:00:00Z"})
    engine = an_engine(api, body, node, [runtime_pod("web-0")], events)
    api.fail("PATCH", nm_path("nm1", subresource="status"), Unreachable("Cannot connect to host"))

    async def scenario() -> None:
        # The status that records the hand-back could not be written: the node is not given back, nor any pod evicted.
        assert await engine.step() == ERROR_RETRY_SECONDS
        assert api.writes() == [("PATCH", nm_path("nm1", subresource="status"))] and ("Node", "Uncordon") not in events
        api.calls.clear()
        assert await engine.step() is None
        assert api.writes() == [("PATCH", nm_path("nm1", subresource="status")), ("PATCH", node_path("n1"))]
        written = api.calls[0].body["status"]
        assert written["conditions"][-1]["type"] == "TimedOut" and written["drainStartTime"] == "2020-01-01T00:00:00Z"
        assert api.calls[1].body["metadata"]["annotations"][nodes.HOLDER] is None and ("Node", "Uncordon") in events
        # The node as given back: the next steps write the ended status until it is shown, and never touch the node.
        api.objects[node_path("n1")] = own_node(engine).objects["/n1"] = runtime_node()
        api.calls.clear()
        assert await engine.step() is None and engine.wanted == WatchMode.NOTHING
        assert api.writes() == [("PATCH", nm_path("nm1", subresource="status"))]
        assert api.calls_to("PATCH")[-1].body["status"]["conditions"][-1]["type"] == "TimedOut"
        body["status"] = api.calls_to("PATCH")[-1].body["status"]  # kopf shows it now
        api.calls.clear()
        assert await engine.step() is None and api.calls == [], "given back by this drain: a wake reads nothing"

    run(scenario)


def test_a_hand_back_cut_short_by_the_api_after_its_status_is_stored_is_finished_and_the_node_never_taken_again() -> None:
    # The status recording the timeout is written, then giving the node back fails; kopf has not shown that status
    # yet (the API is away): the next step finishes the hand-back from what it wrote, and takes nothing.
    api, events = FakeApi(), list[tuple[str, str]]()
    node = taken(runtime_node())
    api.objects[node_path("n1")] = node
    body = runtime_nm("nm1", drain={"timeoutSeconds": 1, "onTimeout": "HandBack"},
                      status={"phase": "Running", "drainStartTime": "2020-01-01T00:00:00Z"})
    engine = an_engine(api, body, node, [runtime_pod("web-0")], events)
    api.fail("PATCH", node_path("n1"), Unreachable("Cannot connect to host"))

    async def scenario() -> None:
        assert await engine.step() == ERROR_RETRY_SECONDS
        assert api.writes() == [("PATCH", nm_path("nm1", subresource="status")), ("PATCH", node_path("n1"))]
        api.calls.clear()
        assert await engine.step() is None and engine.wanted == WatchMode.NOTHING
        # The ended status is written again until kopf shows it, the same: no new drainStartTime, no pod evicted.
        assert api.writes() == [("PATCH", nm_path("nm1", subresource="status")), ("PATCH", node_path("n1"))]
        written = api.calls_to("PATCH")[0].body["status"]
        assert written["conditions"][-1]["type"] == "TimedOut" and written["drainStartTime"] == "2020-01-01T00:00:00Z"
        assert api.calls_to("PATCH")[1].body["metadata"]["annotations"][nodes.HOLDER] is None and ("Node", "Uncordon") in events

    run(scenario)


def test_a_maintenance_whose_status_records_its_timeout_hand_back_gives_back_the_node_it_still_holds() -> None:
    # The status saying so was written, then the operator restarted (or another replica took the lead) before the node
    # was given back: the next engine, reading only that status and the node, finishes the hand-back, and takes nothing.
    api, events = FakeApi(), list[tuple[str, str]]()
    body = runtime_nm("nm1", drain={"timeoutSeconds": 1, "onTimeout": "HandBack"}, status=TIMED_OUT)
    api.objects[node_path("n1")] = taken(runtime_node())
    engine = an_engine(api, body, taken(runtime_node()), [runtime_pod("web-0")], events)

    async def scenario() -> None:
        assert await engine.step() is None and engine.wanted == WatchMode.NOTHING
        assert api.writes() == [("PATCH", node_path("n1"))]  # given back; no status written anew (no new drainStartTime)
        assert api.calls_to("PATCH")[0].body["metadata"]["annotations"][nodes.HOLDER] is None and ("Node", "Uncordon") in events
        api.objects[node_path("n1")] = runtime_node()
        api.calls.clear()
        assert await engine.step() is None and api.writes() == []

    run(scenario)


def test_a_status_applied_though_its_answer_was_lost_counts_as_written_once_it_shows() -> None:
    # The status saying the drain succeeded reached the API server, but its answer was lost on the way. Once kopf shows
    # it, the drain has succeeded: a pod bound to the node later is evicted as a late pod, and the drain's clock, over
    # with its success, never times it out (its node is not given back), whatever this process last heard back.
    api, events = FakeApi(), list[tuple[str, str]]()
    node = taken(runtime_node())
    body = runtime_nm("nm1", drain={"timeoutSeconds": 1, "onTimeout": "HandBack"},
                      status={"phase": "Running", "drainStartTime": "2020-01-01T00:00:00Z"})
    engine = an_engine(api, body, node, [], events)
    status_path = nm_path("nm1", subresource="status")
    api.fail("PATCH", status_path, Unreachable("connection reset by peer"))

    async def scenario() -> None:
        assert await engine.step() == ERROR_RETRY_SECONDS
        sent = api.calls_to("PATCH", status_path)[-1].body["status"]
        assert sent["phase"] == "Succeeded"
        body["status"] = sent  # it was applied: kopf shows it
        own_pods(engine).objects = {"app/late-0": runtime_pod("late-0")}
        api.calls.clear()
        await engine.step()
        assert ("POST", pod_path("app", "late-0") + "/eviction") in api.writes()
        assert ("PATCH", node_path("n1")) not in api.writes() and ("Node", "Uncordon") not in events
        late = api.calls_to("PATCH", status_path)[-1].body["status"]
        assert late["phase"] != "Failed" and [c["reason"] for c in late["conditions"] if c["type"] == "Drained"] == ["LatePods"]

    run(scenario)

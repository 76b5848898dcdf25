"""The executor carries a plan out and reports what each removal met, through typed API errors only, and
when a refused removal is tried again."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from prometheus_client import REGISTRY

from node_maintenance.api.paths import node_path, pod_path
from node_maintenance.client.errors import Conflict, Forbidden, NotFound, TooManyRequests, Unreachable
from node_maintenance.drain.events import Event, Type
from node_maintenance.drain.handback import hand_back
from node_maintenance.drain.plans import Action, Plan, Removal
from node_maintenance.runtime.executor import ACCEPTED_SECONDS, BACKOFF_MAX_SECONDS, Executor, retry_delay
from tests.unit.builders import FakeApi, held_node, nm, node

BODY = nm("nm", "n1", version="v1alpha1", uid="u")
STATUS_PATH = "/apis/nodemaintenance.kubevirt.io/v1alpha1/nodemaintenances/nm/status"
RESOURCE_VERSION = "7"  # the NodeMaintenance's, as the step read it
STATUS = {"phase": "Running", "totalpods": 2, "evictionPods": 2, "pendingPods": ["a"], "lastError": "",
          "conditions": [], "drainStartTime": "2026-01-01T00:00:00Z", "lastUpdate": "2026-01-01T00:00:01Z"}


def _eviction(name: str) -> str:
    return pod_path("ns", name) + "/eviction"


def _run(api: FakeApi, plan: Plan, stored: dict[str, Any] | None = None, version: str = "v1alpha1") -> Any:
    events: list[tuple[str, str]] = []
    executor = Executor(api, BODY, version, lambda obj, type_, reason, message: events.append((obj["kind"], reason)),
                        logging.LoggerAdapter(logging.getLogger("test"), {}))
    outcome = asyncio.run(executor.run(plan, node("n1", uid="nu"), {}, stored or {}, RESOURCE_VERSION))
    return outcome, events


def _removal(name: str, budget: str | None = None, delete: bool = False) -> Removal:
    return Removal("ns", name, f"uid-{name}", delete, 5, budget, "7" if budget else "")


def test_node_conflict_stops_before_any_removal_or_status() -> None:
    api = FakeApi()
    api.fail("PATCH", node_path("n1"), Conflict(409, "Conflict", "changed"))
    outcome, events = _run(api, Plan("Running", STATUS, {"spec": {}}, (_removal("a"),), (Event(False, Type.NORMAL, "BeginMaintenance", "m"),)))
    assert outcome.node_conflict and [c[0] for c in api.calls] == ["PATCH"] and events == []


def test_each_answer_becomes_the_next_attempt() -> None:
    api = FakeApi()
    api.fail("POST", _eviction("a"), TooManyRequests(429, "TooManyRequests", "budget", 0, by_budget=True))
    api.fail("POST", _eviction("b"), TooManyRequests(429, "TooManyRequests", "slow down", 9))
    api.fail("POST", _eviction("gone"), NotFound(404, "NotFound", ""))
    api.fail("POST", _eviction("denied"), Forbidden(403, "Forbidden", "no"))
    plan = Plan("Running", STATUS, None, (_removal("a", "ns/web"), _removal("b"), _removal("gone"), _removal("denied"), _removal("ok"),
                                         _removal("done", delete=True)))
    before = time.time()
    outcome, _ = _run(api, plan)
    a, b, gone, denied, ok, done = (outcome.attempts[f"uid-{n}"] for n in ("a", "b", "gone", "denied", "ok", "done"))
    assert a.refused_by == (("ns/web", "7"),) and not a.accepted  # waits for the budget to change
    assert b.not_before >= before + 9 and "slow down" in b.error  # Retry-After honoured
    assert gone is None
    assert "Forbidden" in denied.error and denied.not_before > before
    assert ok.accepted and ok.not_before >= before + ACCEPTED_SECONDS - 1
    assert done.accepted
    eviction = next(call.body for call in api.calls if call.path.endswith("/ok/eviction"))
    assert eviction["deleteOptions"] == {"preconditions": {"uid": "uid-ok"}, "gracePeriodSeconds": 5}
    assert any(call.method == "DELETE" and call.path.endswith("/pods/done") for call in api.calls)


def test_status_goes_through_the_working_version_with_only_what_it_holds() -> None:
    api = FakeApi()
    _, events = _run(api, Plan("Running", STATUS, None, (), (Event(True, Type.NORMAL, "BeginMaintenance", "m"),)))
    last = api.calls[-1]
    method, path, body = last.method, last.path, last.body
    assert (method, path) == ("PATCH", STATUS_PATH)
    assert set(body["status"]) == {"phase", "totalpods", "evictionPods", "pendingPods", "lastError"}
    assert body["metadata"] == {"resourceVersion": RESOURCE_VERSION}  # a late write of ours carried out after it is refused
    assert events == [("Node", "BeginMaintenance")]


def test_unchanged_status_is_not_written_again() -> None:
    api = FakeApi()
    _run(api, Plan("Running", STATUS), stored={**STATUS, "lastUpdate": "2026-01-01T00:00:09Z"})
    assert api.calls == []


def test_retry_delay_honours_retry_after_backs_off_and_caps() -> None:
    assert retry_delay(1, 0, 0) == 1 and retry_delay(3, 0, 0) == 4
    assert retry_delay(1, 10, 0) == 10  # never sooner than the server asked
    assert retry_delay(30, 0, 0) == BACKOFF_MAX_SECONDS
    assert retry_delay(2, 0, 0.999) == pytest.approx(2 * 1.2, rel=1e-3)  # jitter spreads by at most a fifth


def test_a_429_the_budget_did_not_send_is_tried_again_not_charged_to_the_budget() -> None:
    # API Priority and Fairness, or an admission webhook, refuses an eviction of a pod a budget covers: no
    # change of that budget may ever come, so the pod is tried again at max(Retry-After, backoff).
    api = FakeApi()
    api.fail("POST", _eviction("a"), TooManyRequests(429, "TooManyRequests", "Too many requests, please try again later.", 3))
    before = time.time()
    outcome, _ = _run(api, Plan("Running", STATUS, None, (_removal("a", "ns/web"),)))
    attempt = outcome.attempts["uid-a"]
    assert attempt.refused_by == () and not attempt.accepted
    assert before + 3 <= attempt.not_before and "try again later" in attempt.error


def test_a_status_that_could_not_be_written_holds_every_removal_and_the_hand_back() -> None:
    # A keep-alive connection dropped under the status write: nothing the status was to record is done, so that a
    # restart or a new leader, which reads only the stored status and the node, loses nothing that was done.
    api = FakeApi()
    api.fail("PATCH", STATUS_PATH, Unreachable("server disconnected"), times=2)
    outcome, _ = _run(api, Plan("Running", STATUS, None, (_removal("a"), _removal("done", delete=True))))
    assert outcome.status_failed and not outcome.status_written
    handback = hand_back("nm", "n1", held_node("nm"), coordinated=False)
    handed, _ = _run(api, Plan("Failed", STATUS, handback=handback, events=(Event(False, Type.WARNING, "TimedOut", "m"),)))
    assert handed.status_failed and not handed.node_conflict
    assert api.writes() == [("PATCH", STATUS_PATH)] * 2  # no eviction, no deletion, the node not given back


def test_the_status_recording_the_evicted_workloads_is_written_before_their_pods_are_removed() -> None:
    api = FakeApi()
    recorded = {**STATUS, "evictedWorkloads": [{"kind": "ReplicaSet", "namespace": "ns", "name": "web"}]}
    _run(api, Plan("Running", recorded, None, (_removal("a"), _removal("done", delete=True))), stored=STATUS, version="v1beta1")
    status_path = STATUS_PATH.replace("v1alpha1", "v1beta1")
    assert api.writes()[0] == ("PATCH", status_path) and api.calls[0].body["status"]["evictedWorkloads"] == recorded["evictedWorkloads"]
    assert sorted(api.writes()[1:]) == [("DELETE", pod_path("ns", "done")), ("POST", _eviction("a"))]


def test_a_hook_job_the_server_could_not_take_is_not_a_refused_template() -> None:
    api = FakeApi()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "nm-pre-drain-1", "namespace": "ops"}}
    api.fail("POST", "/apis/batch/v1/namespaces/ops/jobs", Unreachable("connection reset"))
    outcome, _ = _run(api, Plan("Running", STATUS, None, (_removal("a"),), jobs=(job,)))
    assert outcome.refused_jobs == {"nm-pre-drain-1": None} and outcome.attempts["uid-a"].accepted


def test_a_plan_stopped_midway_ends_only_once_the_writes_sent_are_answered() -> None:
    # A drain's NodeMaintenance deleted while its node patch is in flight: the handback reads the node only after the
    # drain ended, so it must see that patch (a cancelled request may still be applied), never a node taken after it looked.
    async def scenario() -> None:
        api, sent, answer = FakeApi(), asyncio.Event(), asyncio.Event()

        async def patch(path: str, body: dict[str, Any], content_type: str | None = None) -> dict[str, Any]:
            sent.set()
            await answer.wait()
            return body

        api.patch = patch  # type: ignore[method-assign]
        executor = Executor(api, BODY, "v1alpha1", lambda *_: None, logging.LoggerAdapter(logging.getLogger("test"), {}))
        carrying_out = asyncio.create_task(executor.run(Plan("Running", dict(STATUS), node_patch={"spec": {}}), None, {}, {}, RESOURCE_VERSION))
        await sent.wait()
        carrying_out.cancel()
        await asyncio.sleep(0.05)
        assert not carrying_out.done(), "the plan ended with a write in flight"
        answer.set()
        with pytest.raises(asyncio.CancelledError):
            await carrying_out

    asyncio.run(scenario())


def _escalations(action: Action) -> float:
    """The escalations counted of ``action``, as the metrics endpoint shows them."""
    return REGISTRY.get_sample_value("node_maintenance_escalations_total", {"action": str(action)}) or 0.0


def test_an_escalated_removal_is_a_deletion_with_its_grace_told_on_the_pod_and_counted() -> None:
    api = FakeApi()
    removal = Removal("ns", "a", "uid-a", True, 0, None, escalation=Action.FORCE_DELETE_PODS, bypassed=("ns/web",))
    told = Event(False, Type.WARNING, Action.FORCE_DELETE_PODS, "m", pod=("ns", "a", "uid-a"))
    before = _escalations(Action.FORCE_DELETE_PODS)
    outcome, events = _run(api, Plan("Running", STATUS, None, (removal,), (told,)))
    deletion = next(c for c in api.calls if c.method == "DELETE")
    assert deletion.path == pod_path("ns", "a") and deletion.body["gracePeriodSeconds"] == 0
    assert deletion.body["preconditions"] == {"uid": "uid-a"} and outcome.attempts is not None and outcome.attempts["uid-a"].accepted
    assert _escalations(Action.FORCE_DELETE_PODS) == before + 1
    assert events == [("Pod", Action.FORCE_DELETE_PODS)]


def test_a_plan_handing_the_node_back_writes_the_status_then_patches_the_node_as_a_deletion_would() -> None:
    api = FakeApi()
    held = held_node("nm")
    handback = hand_back("nm", "n1", held, coordinated=False)
    outcome, events = _run(api, Plan("Failed", STATUS, handback=handback, events=(Event(False, Type.WARNING, "TimedOut", "m"),)))
    assert api.writes() == [("PATCH", STATUS_PATH), ("PATCH", node_path("n1"))] and api.calls[1].body == handback.node_patch
    assert outcome.status_written and not outcome.node_conflict
    assert ("NodeMaintenance", "TimedOut") in events and ("Node", "Uncordon") in events


def test_a_node_changed_under_the_hand_back_is_decided_again() -> None:
    api = FakeApi()
    api.fail("PATCH", node_path("n1"), Conflict(409, "Conflict", "changed"))
    outcome, _ = _run(api, Plan("Failed", STATUS, handback=hand_back("nm", "n1", held_node("nm"), coordinated=False)))
    assert outcome.node_conflict and api.writes() == [("PATCH", STATUS_PATH), ("PATCH", node_path("n1"))]


def test_a_hook_s_note_at_a_deletion_carries_the_resource_version_and_goes_on_past_a_refusal() -> None:
    """A note whose answer never came, carried out after a newer one, would put the older condition back: it is refused."""
    api = FakeApi()
    executor = Executor(api, BODY, "v1alpha1", lambda *_: None, logging.LoggerAdapter(logging.getLogger("test"), {}))
    condition = {"conditions": [{"type": "PostMaintenanceHookSucceeded", "status": "False"}]}
    asyncio.run(executor.note(condition, RESOURCE_VERSION))
    assert [(c.method, c.path, c.body) for c in api.calls] == [
        ("PATCH", STATUS_PATH, {"metadata": {"resourceVersion": RESOURCE_VERSION}, "status": condition})]
    api.fail("PATCH", STATUS_PATH, NotFound(404, "NotFound", "gone"))
    asyncio.run(executor.note(condition, RESOURCE_VERSION))  # refused: let go, the hand-back goes on

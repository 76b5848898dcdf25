"""The status a user reads from a NodeMaintenance."""

from __future__ import annotations

from typing import Any

from node_maintenance.api.conditions import Condition
from node_maintenance.drain import status

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def build(previous: dict[str, Any], phase: status.Phase, pending: list[tuple[str, str]], *, to_evict: int = 4, error: str = "", now: str = T1) -> dict[str, Any]:
    return status.build(previous, phase=phase, total=6, eviction_pods=to_evict, pending=pending, last_error=error, generation=2, now=now)


def test_progress_is_the_share_of_pods_gone() -> None:
    assert status.progress(4, 4) == 0 and status.progress(4, 1) == 75 and status.progress(4, 0) == 100
    assert status.progress(0, 0) == 100 and status.progress(2, 5) == 0


def test_running_lists_pending_pods_and_is_not_drained() -> None:
    built = build({}, status.Phase.RUNNING, [("ns", "a"), ("ns", "b")], error="ns/a waits on PodDisruptionBudget ns/web")
    assert built["pendingPods"] == ["a", "b"] and built["pendingPodsRefs"][0] == {"namespace": "ns", "name": "a"}
    assert built["drainProgress"] == 50 and built["lastError"].startswith("ns/a waits")
    assert built["conditions"] == [
        {"type": "Drained", "status": "False", "reason": "Draining", "message": "2 pod(s) still to leave the node", "observedGeneration": 2, "lastTransitionTime": T1}
    ]


def test_succeeded_is_drained_and_keeps_the_transition_time_until_it_flips() -> None:
    running = build({}, status.Phase.RUNNING, [("ns", "a")], now=T0)
    done = build(running, status.Phase.SUCCEEDED, [], now=T1)
    assert done["drainProgress"] == 100 and done["pendingPods"] == [] and done["lastError"] == ""
    drained = done["conditions"][0]
    assert drained["status"] == "True" and drained["lastTransitionTime"] == T1
    again = build(done, status.Phase.SUCCEEDED, [], now="2026-01-01T00:05:00Z")
    assert again["conditions"][0]["lastTransitionTime"] == T1


def test_failure_before_taking_the_node_shows_no_progress() -> None:
    built = build({}, status.Phase.FAILED, [], to_evict=0, error="node 'x' not found")
    assert built["drainProgress"] == 0 and built["conditions"][0]["reason"] == "MaintenanceFailed"


def test_same_ignores_only_the_update_time() -> None:
    a = build({}, status.Phase.RUNNING, [("ns", "a")], now=T0)
    assert status.same(a, build({}, status.Phase.RUNNING, [("ns", "a")], now=T0) | {"lastUpdate": T1})
    assert not status.same(a, build({}, status.Phase.RUNNING, [], now=T0))


def test_a_hook_condition_is_noted_once_with_its_error_and_cleared_when_met() -> None:
    running = Condition("PostMaintenance", "False", "JobRunning", "postMaintenance Job ops/hook-nm running")
    fields = status.noted({"phase": "Succeeded", "lastError": ""}, running, generation=2, now="2026-01-01T00:00:00Z")
    assert fields is not None and fields["lastError"] == running.message
    assert [(c["type"], c["reason"], c["observedGeneration"]) for c in fields["conditions"]] == [("PostMaintenance", "JobRunning", 2)]
    assert status.noted({"phase": "Succeeded", **fields}, running, generation=2, now="2026-01-01T00:00:05Z") is None
    met = status.noted({**fields}, Condition("PostMaintenance", "True", "JobSucceeded", "done"), generation=2, now="2026-01-01T00:00:09Z")
    assert met is not None and met["lastError"] == ""

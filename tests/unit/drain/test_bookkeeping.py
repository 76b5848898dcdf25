"""What a drain remembers between steps: attempts, evictions counted against budgets, refused Jobs, and
when its status is written and it looks again."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.drain import bookkeeping, memory
from node_maintenance.drain.plans import Action, Attempt, Plan, Removal


def removal(name: str, budget: str | None = "app/web") -> Removal:
    return Removal("app", name, f"uid-{name}", False, None, budget)


def test_evictions_count_against_their_budget_until_the_api_accepts_or_refuses_them() -> None:
    sent = [removal("a"), removal("b"), removal("c", budget=None)]
    assert bookkeeping.counted(sent) == [bookkeeping.Counted("app/web", "a"), bookkeeping.Counted("app/web", "b")]
    results = {"uid-a": Attempt(10.0, accepted=True), "uid-b": Attempt(10.0, refused_by=(("app/web", "7"),))}
    assert bookkeeping.uncounted(sent, results) == [bookkeeping.Counted("app/web", "b")]  # refused: it never counted
    assert bookkeeping.uncounted(sent, None) == bookkeeping.counted(sent)  # the step stopped before sending: none counts


def test_a_deletion_past_budgets_counts_against_each_until_the_api_accepts_or_refuses_it() -> None:
    deleted = Removal("app", "a", "uid-a", True, None, None, escalation=Action.DELETE_PODS, bypassed=("app/web", "app/all"))
    counted = [bookkeeping.Counted("app/web", "a", bypassing=True), bookkeeping.Counted("app/all", "a", bypassing=True)]
    assert bookkeeping.counted([deleted]) == counted
    assert bookkeeping.uncounted([deleted], {"uid-a": Attempt(10.0, accepted=True)}) == []
    assert bookkeeping.uncounted([deleted], {"uid-a": Attempt(10.0, error="refused")}) == counted
    assert bookkeeping.counted([Removal("app", "done", "uid-done", True, None, None)]) == []  # a finished pod's deletion paces nothing


def test_attempts_take_each_result_and_forget_pods_gone_from_the_node() -> None:
    before = {"uid-a": Attempt(1.0, error="x", failures=1), "uid-gone": Attempt(1.0)}
    after = memory.merge_attempts(before, [removal("a"), removal("b")], {"uid-a": None, "uid-b": Attempt(5.0, accepted=True)},
                                 live={"uid-a", "uid-b"})
    assert after == {"uid-b": Attempt(5.0, accepted=True)}


def test_the_next_try_is_the_earliest_attempt_still_ahead() -> None:
    attempts = {"a": Attempt(105.0), "b": Attempt(102.0), "c": Attempt(90.0)}
    assert memory.next_try_in(attempts, 100.0) == 2.0
    assert memory.next_try_in({"c": Attempt(90.0)}, 100.0) is None
    assert memory.sooner(None, 3.0) == 3.0 and memory.sooner(2.0, None) == 2.0 and memory.sooner(None, None) is None


def test_a_status_is_written_on_a_new_phase_an_event_or_after_the_interval() -> None:
    stored = {"phase": "Running"}
    soon = bookkeeping.next_write_in(100.0, bookkeeping.NM_STATUS_INTERVAL_SECONDS, 100.1)
    assert bookkeeping.status_due("Succeeded", stored, soon, False)
    assert bookkeeping.status_due("Running", stored, soon, True)
    assert not bookkeeping.status_due("Running", stored, soon, False)
    assert bookkeeping.status_due("Running", stored, bookkeeping.next_write_in(100.0, bookkeeping.NM_STATUS_INTERVAL_SECONDS, 102.0), False)


@pytest.mark.parametrize(("written_at", "now"), [(106.2, 136.2), (0.1, 30.1), (1e6 + 0.3, 1e6 + 30.3), (17.30074, 47.30074)])
def test_a_status_waiting_for_its_interval_is_due_the_moment_the_drain_looks_again_for_it(written_at: float, now: float) -> None:
    """Found by the simulation: 136.2 - 106.2 is 29.999999999999986 in floating point, so a step judged the status
    not due while the drain, reckoning 106.2 + 30 - 136.2, looked again at once, forever at one instant. The drain
    looks again when the same sum says so, and the step then writes. And 17.30074 + 30 - 47.30074 is 7.1e-15 (seed
    1601880301): the drain looked again in that long, which a loop whose clock moves in steps never reaches."""
    stored = {"phase": "Pending"}
    plan = Plan(phase="Pending", status={"phase": "Pending", "lastError": "moved"})  # says something new, not due yet
    _, recheck = memory.remember(memory.Memory(stored=stored, written_at=written_at), plan, memory.Outcome(),
                                 memory.Clock(wall=now, monotonic=now), memory.Carried(write=False, foreign=False, interval=30.0), "v1beta1")
    assert recheck is not None and recheck <= 0  # the interval has passed: the drain looks again now
    assert bookkeeping.status_due("Pending", stored, bookkeeping.next_write_in(written_at, 30.0, now), False)  # and writes


def test_a_refused_job_is_remembered_until_it_is_created() -> None:
    known = memory.merge_refusals({}, {"job": "forbidden: serviceAccountName"})
    assert known == {"job": "forbidden: serviceAccountName"}
    assert memory.merge_refusals(known, {}) == known
    assert memory.merge_refusals(known, {"job": None}) == {}


def test_a_reworded_wait_is_written_at_most_every_30_s_a_new_reason_at_the_usual_pace() -> None:
    def queued(reason: str, message: str) -> dict[str, Any]:
        return {"phase": "Pending", "conditions": [{"type": "Queued", "status": "True", "reason": reason, "message": message}]}

    stored = queued("WaitingForSlot", "zone=a is full")
    assert bookkeeping.status_interval(stored, queued("WaitingForSlot", "zone=b is full")) == bookkeeping.IN_LINE_STATUS_INTERVAL_SECONDS
    assert bookkeeping.status_interval(stored, queued("SlotGivenBack", "slot given back")) == bookkeeping.NM_STATUS_INTERVAL_SECONDS
    moved = bookkeeping.status_interval(stored, queued("WaitingForSlot", "zone=b is full"))
    assert not bookkeeping.status_due("Pending", stored, bookkeeping.next_write_in(0.0, moved, 10.0), False)
    assert bookkeeping.status_due("Pending", stored, bookkeeping.next_write_in(0.0, moved, 30.0), False)


def test_a_long_line_writes_its_rewordings_at_a_bounded_pace_together() -> None:
    # Each at most every 30 s while the line is short; a line of a thousand, each every 200 s: 5 writes a second in all.
    assert bookkeeping.in_line_interval(4) == bookkeeping.IN_LINE_STATUS_INTERVAL_SECONDS
    for queued in (150, 1000, 5000):
        assert queued / bookkeeping.in_line_interval(queued) <= bookkeeping.IN_LINE_WRITES_PER_SECOND
    assert bookkeeping.in_line_interval(1000) == 200.0
    stored: dict[str, Any] = {"phase": "Pending", "conditions": [{"type": "Queued", "status": "True", "reason": "WaitingForSlot", "message": "zone=a is full"}]}
    moved = {**stored, "conditions": [{**stored["conditions"][0], "message": "zone=b is full"}]}
    assert bookkeeping.status_interval(stored, moved, bookkeeping.in_line_interval(1000)) == 200.0


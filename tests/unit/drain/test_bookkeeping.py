"""What a drain remembers between steps: attempts, evictions counted against budgets, refused Jobs, and
when its status is written and it looks again."""

from __future__ import annotations

from typing import Any

from node_maintenance.drain import bookkeeping, memory
from node_maintenance.drain.plans import Attempt, Removal


def removal(name: str, budget: str | None = "app/web") -> Removal:
    return Removal("app", name, f"uid-{name}", False, None, budget)


def test_evictions_count_against_their_budget_until_the_api_accepts_or_refuses_them() -> None:
    sent = [removal("a"), removal("b"), removal("c", budget=None)]
    assert bookkeeping.counted(sent) == [bookkeeping.Eviction("app/web", "a"), bookkeeping.Eviction("app/web", "b")]
    results = {"uid-a": Attempt(10.0, accepted=True), "uid-b": Attempt(10.0, refused_by=(("app/web", "7"),))}
    assert bookkeeping.uncounted(sent, results) == [bookkeeping.Eviction("app/web", "b")]  # refused: it never counted
    assert bookkeeping.uncounted(sent, None) == bookkeeping.counted(sent)  # the step stopped before sending: none counts


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
    assert bookkeeping.status_due("Succeeded", stored, 0.1, False)
    assert bookkeeping.status_due("Running", stored, 0.1, True)
    assert not bookkeeping.status_due("Running", stored, 0.1, False)
    assert bookkeeping.status_due("Running", stored, bookkeeping.NM_STATUS_INTERVAL_SECONDS, False)


def test_a_refused_job_is_remembered_until_it_is_created() -> None:
    known = memory.merge_refusals({}, {"job": "forbidden: serviceAccountName"})
    assert known == {"job": "forbidden: serviceAccountName"}
    assert memory.merge_refusals(known, {}) == known
    assert memory.merge_refusals(known, {"job": None}) == {}


def test_a_place_in_line_that_moved_is_written_at_most_every_30_s_a_new_reason_at_the_usual_pace() -> None:
    def queued(reason: str, message: str) -> dict[str, Any]:
        return {"phase": "Pending", "conditions": [{"type": "Queued", "status": "True", "reason": reason, "message": message}]}

    stored = queued("WaitingForSlot", "position 7 of 980")
    assert bookkeeping.status_interval(stored, queued("WaitingForSlot", "position 6 of 980")) == bookkeeping.IN_LINE_STATUS_INTERVAL_SECONDS
    assert bookkeeping.status_interval(stored, queued("SlotGivenBack", "slot given back")) == bookkeeping.NM_STATUS_INTERVAL_SECONDS
    moved = bookkeeping.status_interval(stored, queued("WaitingForSlot", "position 6 of 980"))
    assert not bookkeeping.status_due("Pending", stored, 10.0, False, moved) and bookkeeping.status_due("Pending", stored, 30.0, False, moved)


def test_a_long_line_writes_its_places_at_a_bounded_pace_together() -> None:
    # Each at most every 30 s while the line is short; a line of a thousand, each every 200 s: 5 writes a second in all.
    assert bookkeeping.in_line_interval(4) == bookkeeping.IN_LINE_STATUS_INTERVAL_SECONDS
    for queued in (150, 1000, 5000):
        assert queued / bookkeeping.in_line_interval(queued) <= bookkeeping.IN_LINE_WRITES_PER_SECOND
    assert bookkeeping.in_line_interval(1000) == 200.0
    stored: dict[str, Any] = {"phase": "Pending", "conditions": [{"type": "Queued", "status": "True", "reason": "WaitingForSlot", "message": "position 7 of 1000"}]}
    moved = {**stored, "conditions": [{**stored["conditions"][0], "message": "position 6 of 1000"}]}
    assert bookkeeping.status_interval(stored, moved, bookkeeping.in_line_interval(1000)) == 200.0

"""What a drain remembers between steps and what it watches, as pure functions: a status written once its phase
changes and not again until it differs, attempts merged and forgotten with their pods, a hand-back remembered as ended
once its status is written, the watch mode each step leads to, and a drain's time counted on the monotonic clock."""

from __future__ import annotations

import dataclasses

import pytest

from node_maintenance.drain.handback import Handback
from node_maintenance.drain.memory import (
    ERROR_RETRY_SECONDS,
    SHORTEST_WAIT_SECONDS,
    Carried,
    Clock,
    Memory,
    Outcome,
    WatchMode,
    counted,
    remember,
    seen,
    shown,
    wait_seconds,
    watch_mode,
)
from node_maintenance.drain.plans import Attempt, Plan, Removal
from node_maintenance.drain.status import Phase

CLOCK = Clock(wall=1000.0, monotonic=50.0)
RUNNING = {"phase": "Running", "pendingPods": ["ns/a"]}
SUCCEEDED = {"phase": "Succeeded", "pendingPods": []}
EVICT_A = Removal(namespace="ns", name="a", uid="ua", delete=False, grace=None, budget=None)


def carried(*, write: bool = True, foreign: bool = False, live: frozenset[str] | None = None) -> Carried:
    return Carried(write=write, foreign=foreign, interval=2.0, live=live)


@pytest.mark.parametrize(("memory", "plan", "outcome", "how", "stored", "written", "recheck"), [
    pytest.param(Memory.of({}), Plan(phase=Phase.RUNNING, status=RUNNING, recheck_in=7.0), Outcome(status_written=True), carried(),
                 RUNNING, (RUNNING,), 7.0, id="a status written is remembered as stored and as one of ours"),
    pytest.param(dataclasses.replace(Memory.of(RUNNING), written_at=49.0), Plan(phase=Phase.RUNNING, status=SUCCEEDED), Outcome(),
                 carried(write=False), RUNNING, (RUNNING,), 1.0, id="a status not due yet is looked at again when its interval has passed"),
    pytest.param(Memory.of({}), Plan(phase=Phase.RUNNING, status=RUNNING, recheck_in=30.0), Outcome(status_failed=True), carried(),
                 {}, (), ERROR_RETRY_SECONDS, id="a status write that failed is tried again after a pause, not at once"),
    pytest.param(Memory.of(RUNNING), Plan(phase=Phase.FAILED, status=SUCCEEDED, handback=Handback(node_patch=None, release_lease=False, events=(), uncordons=False)),
                 Outcome(status_failed=True), carried(), RUNNING, (RUNNING,), ERROR_RETRY_SECONDS,
                 id="a hand-back whose status could not be written was not carried out: decided again after a pause"),
    pytest.param(Memory.of(RUNNING), Plan(phase=Phase.FAILED, status=SUCCEEDED, handback=Handback(node_patch={}, release_lease=False, events=(), uncordons=False)),
                 Outcome(node_conflict=True, status_written=True), carried(), SUCCEEDED, (RUNNING, SUCCEEDED), 0.0,
                 id="a hand-back whose status was written is remembered as ended and as one of ours; a node changed under it is read again at once"),
    pytest.param(Memory.of(RUNNING), Plan(phase=Phase.RUNNING, status=RUNNING), Outcome(node_conflict=True), carried(),
                 RUNNING, (RUNNING,), None, id="a node that changed under the patch is planned again when its watch brings it"),
])
def test_what_a_step_leaves_in_memory(memory: Memory, plan: Plan, outcome: Outcome, how: Carried, stored: dict[str, object],
                                      written: tuple[dict[str, object], ...], recheck: float | None) -> None:
    after, looked = remember(memory, plan, outcome, CLOCK, how, "v1beta1")
    assert after.stored == stored
    assert after.written == written
    assert looked == recheck


def test_a_status_sent_without_an_answer_is_the_stored_one_once_the_object_shows_it() -> None:
    unanswered = Outcome(status_failed=True, status_unanswered=True)
    sent, _ = remember(Memory.of(RUNNING), Plan(phase=Phase.SUCCEEDED, status=SUCCEEDED), unanswered, CLOCK, carried(), "v1beta1")
    assert sent.stored == RUNNING and sent.sent == (SUCCEEDED,)
    assert shown(sent, RUNNING, "v1beta1") == sent  # not applied (yet): nothing changes
    applied = shown(sent, {**SUCCEEDED, "lastUpdate": "2026-01-01T00:00:00Z"}, "v1beta1")
    assert (applied.stored, applied.written, applied.sent) == (SUCCEEDED, (RUNNING, SUCCEEDED), ())
    # A later write that was answered: nothing sent before it is waited for any more.
    answered, _ = remember(sent, Plan(phase=Phase.SUCCEEDED, status=SUCCEEDED), Outcome(status_written=True), CLOCK, carried(), "v1beta1")
    assert answered.sent == ()


def test_of_two_statuses_sent_without_an_answer_the_older_shown_first_leaves_the_newer_waited_for() -> None:
    unanswered = Outcome(status_failed=True, status_unanswered=True)
    first, _ = remember(Memory.of({}), Plan(phase=Phase.RUNNING, status=RUNNING), unanswered, CLOCK, carried(), "v1beta1")
    both, _ = remember(first, Plan(phase=Phase.SUCCEEDED, status=SUCCEEDED), unanswered, CLOCK, carried(), "v1beta1")
    older = shown(both, RUNNING, "v1beta1")
    assert (older.stored, older.sent) == (RUNNING, (SUCCEEDED,))
    assert shown(older, SUCCEEDED, "v1beta1").stored == SUCCEEDED


def test_a_status_the_server_refused_is_not_waited_for() -> None:
    # A conflict, a refusal: the server answered, nothing was applied; a watch behind showing the same content is no sign of it.
    refused, _ = remember(Memory.of(SUCCEEDED), Plan(phase=Phase.RUNNING, status=RUNNING), Outcome(status_failed=True), CLOCK, carried(), "v1beta1")
    assert refused.sent == () and shown(refused, RUNNING, "v1beta1").stored == SUCCEEDED


def test_a_status_written_before_its_hand_back_was_held_ends_the_wait_for_those_sent_before() -> None:
    unanswered = Outcome(status_failed=True, status_unanswered=True)
    sent, _ = remember(Memory.of({}), Plan(phase=Phase.RUNNING, status=RUNNING), unanswered, CLOCK, carried(), "v1beta1")
    handback = Handback(node_patch={}, release_lease=False, events=(), uncordons=False)
    for outcome in (Outcome(status_written=True, handback_held="giving the node back failed"), Outcome(status_written=True, node_conflict=True)):
        held, _ = remember(sent, Plan(phase=Phase.FAILED, status=SUCCEEDED, handback=handback), outcome, CLOCK, carried(), "v1beta1")
        assert (held.stored, held.sent, held.written[-1]) == (SUCCEEDED, (), SUCCEEDED)
        assert shown(held, RUNNING, "v1beta1").stored == SUCCEEDED  # the older one shown late takes nothing back


def test_an_attempt_is_remembered_until_its_pod_leaves_the_node() -> None:
    refused = Attempt(not_before=1010.0, error="eviction refused for now")
    plan = Plan(phase=Phase.RUNNING, status=RUNNING, removals=(EVICT_A,))
    after, recheck = remember(Memory.of(RUNNING), plan, Outcome(attempts={"ua": refused}), CLOCK, carried(live=frozenset({"ua"})), "v1beta1")
    assert after.attempts == {"ua": refused}
    assert recheck == 10.0  # tried again at its time, even when no watch reports anything
    gone, _ = remember(after, Plan(phase=Phase.SUCCEEDED, status=SUCCEEDED), Outcome(), CLOCK, carried(live=frozenset()), "v1beta1")
    assert gone.attempts == {}


def test_a_refused_hook_job_is_remembered_until_it_is_created() -> None:
    plan = Plan(phase=Phase.RUNNING, status=RUNNING)
    refused, _ = remember(Memory.of({}), plan, Outcome(refused_jobs={"nm-pre-drain-1": "spec.template: invalid"}), CLOCK, carried(), "v1beta1")
    assert refused.refused_jobs == {"nm-pre-drain-1": "spec.template: invalid"}
    created, _ = remember(refused, plan, Outcome(refused_jobs={"nm-pre-drain-1": None}), CLOCK, carried(), "v1beta1")
    assert created.refused_jobs == {}


def test_the_recent_writes_are_bounded() -> None:
    memory = Memory.of({})
    for n in range(40):
        memory, _ = remember(memory, Plan(phase=Phase.RUNNING, status={"phase": "Running", "n": n}), Outcome(status_written=True), CLOCK,
                             carried(), "v1beta1")
    assert len(memory.written) == 16 and memory.written[-1]["n"] == 39


@pytest.mark.parametrize(("kwargs", "mode"), [
    pytest.param({"ended": True, "plan": Plan(phase=Phase.FAILED, status={})}, WatchMode.NOTHING, id="ended: nothing"),
    pytest.param({"waits": True, "plan": Plan(phase=Phase.PENDING, status={})}, WatchMode.NOTHING, id="in line: nothing"),
    pytest.param({}, WatchMode.NODE_AND_PODS, id="not planned yet: the node and its pods, to plan with"),
    pytest.param({"plan": Plan(phase=Phase.RUNNING, status={}, holds_node=True)}, WatchMode.NODE_AND_PODS, id="draining"),
    pytest.param({"plan": Plan(phase=Phase.SUCCEEDED, status={}, holds_node=True)}, WatchMode.DRAINED, id="drained"),
    pytest.param({"plan": Plan(phase=Phase.SUCCEEDED, status={}, holds_node=False)}, WatchMode.NODE_AND_PODS,
                 id="succeeded without holding the node"),
])
def test_the_watch_mode_follows_the_step(kwargs: dict[str, object], mode: WatchMode) -> None:
    assert watch_mode(**kwargs) == mode  # type: ignore[arg-type]


def test_a_drain_is_counted_on_the_monotonic_clock_from_the_step_that_first_saw_it() -> None:
    """Break 11: the timeout and the ladder read the wall clock alone, so a clock set forward escalated at once."""
    began = "2026-01-01T12:00:00Z"
    at = 1767268800.0  # began, on the wall clock
    assert counted(Memory.of({}), began, 5.0) is None  # not seen yet: the wall clock alone
    first = seen(Memory.of({}), {"phase": "Running", "drainStartTime": began}, Clock(wall=at + 100, monotonic=5.0))
    assert counted(first, began, 15.0) == 110.0  # what the wall clock said when first seen, then the monotonic clock
    jumped = seen(first, {"phase": "Running", "drainStartTime": "2026-01-01T12:00:00.000000+00:00"}, Clock(wall=at + 3700, monotonic=15.0))
    assert counted(jumped, began, 15.0) == 110.0  # the same instant however written, and the wall clock an hour on changes nothing
    assert counted(jumped, "2026-01-01T13:00:00Z", 15.0) is None  # another drain (the node taken again): counted anew
    assert seen(jumped, {"phase": "Pending"}, Clock(wall=at, monotonic=20.0)) == jumped  # a status without a drain changes nothing



@pytest.mark.parametrize(("recheck", "waited"), [
    (None, None),  # until a change
    (8.3 + 0.3 - 8.6, SHORTEST_WAIT_SECONDS),  # floating point's remainder of a deadline (seed 2280511958, windowed)
    (0.0, SHORTEST_WAIT_SECONDS),  # "at once" still lets a clock that moves in steps move
    (2.5, 2.5),
])
def test_a_step_waits_at_least_a_millisecond_to_look_again(recheck: float | None, waited: float | None) -> None:
    assert wait_seconds(recheck) == waited

"""What a drain remembers from one step to the next, and what it watches: a frozen :class:`Memory` changed only by
the pure :func:`remember` (with the rules it follows: the attempts of the removals, the hook Jobs refused, whether the
status written differs), and the :class:`WatchMode` chosen by the pure :func:`watch_mode`.

The engine keeps the memory; these functions say how it changes, so each rule is a unit test.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.conversion import status_fields
from node_maintenance.coordination.remediation import LeaseState
from node_maintenance.drain import bookkeeping, status
from node_maintenance.drain.plans import Attempt, Plan, Removal
from node_maintenance.drain.status import Phase

# A step that met an API error, or a status write that failed, looks again after this long.
ERROR_RETRY_SECONDS = 5.0
# The shortest wait before a step looks again. A deadline reckoned by subtraction can leave floating point's remainder
# (8.3 + 0.3 - 8.6 is 1.8e-15 s): waited as it is, an event loop whose clock moves in steps (the simulation's)
# wakes at the same instant forever, and a real one spins until its clock passes the deadline. A millisecond reaches it.
SHORTEST_WAIT_SECONDS = 0.001
# The statuses this engine wrote last: the object kopf shows may lag behind the newest write by a few.
RECENT_WRITES = 16


class WatchMode(enum.StrEnum):
    """What a drain watches of its own: nothing while it waits in line, the node and its pods while it takes and
    drains it, nothing again once drained (the shared watch of cordoned nodes then shows the node)."""

    NOTHING = "nothing"
    NODE_AND_PODS = "node and pods"
    DRAINED = "drained"


def watch_mode(*, ended: bool = False, waits: bool = False, plan: Plan | None = None) -> WatchMode:
    """What the drain watches after a step: nothing once it has ended or while it waits; its node and pods when it
    must plan with them (``plan`` None: it has not yet); nothing of its own once the plan holds a drained node."""
    if ended or waits:
        return WatchMode.NOTHING
    if plan is not None and plan.phase == Phase.SUCCEEDED and plan.holds_node:
        return WatchMode.DRAINED
    return WatchMode.NODE_AND_PODS


@dataclass(frozen=True)
class Outcome:
    """What carrying out a plan met."""

    node_conflict: bool = False  # the node changed under the patch: plan again on the fresh node
    attempts: Mapping[str, Attempt | None] | None = None  # pod uid -> new attempt (None: forget it)
    lease: LeaseState | None = None  # what the plan's Lease claim met
    refused_jobs: Mapping[str, str | None] = field(default_factory=dict)  # hook Job name -> why it was refused (None: created)
    status_written: bool = False  # the plan's status was sent (it differed from the one stored)
    status_failed: bool = False  # sending it failed: it is still to be written
    status_unanswered: bool = False  # sending it met no answer (a timeout, a lost connection, a server error): it may be applied
    missing: bool = False  # the NodeMaintenance does not exist: a 404 naming it, and a read of it finding none
    handback_held: str = ""  # why the hand-back the stored status records is not done yet: the next step does it


@dataclass(frozen=True)
class Clock:
    """The two clocks a step reads: the wall clock (attempts' retry times) and the monotonic one (status writes)."""

    wall: float
    monotonic: float


@dataclass(frozen=True)
class DrainClock:
    """When this process first saw the drain that started at ``started`` (its drainStartTime): the seconds the wall clock
    said it had run then, and the monotonic clock at that moment. From there its time is counted on the monotonic clock
    (``elapsed``: a wall clock set forward never brings its timeout or its ladder sooner)."""

    started: datetime.datetime
    elapsed: float
    at: float


@dataclass(frozen=True)
class Memory:
    """What one drain remembers between steps."""

    stored: Mapping[str, Any]  # the status as last written (or read)
    written: tuple[Mapping[str, Any], ...] = ()  # the statuses written last, newest last
    sent: tuple[Mapping[str, Any], ...] = ()  # the statuses sent since, whose answer never came (each may be applied)
    written_at: float = 0.0  # monotonic
    attempts: Mapping[str, Attempt] = field(default_factory=dict)
    refused_jobs: Mapping[str, str] = field(default_factory=dict)  # hook Job name -> why the API refused it
    given_back: bool = False  # its hand-back done by this drain: the ended maintenance has nothing left to read
    drain_clock: DrainClock | None = None  # the drain under way, as this process counts its time

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Memory:
        """What a drain starts from: the status as read."""
        return cls(dict(status), (dict(status),) if status else ())


@dataclass(frozen=True)
class Carried:
    """How a plan was carried out: whether its status was due, whether someone else wrote the status, the interval of
    its writes, and the pods still on the node (None: the plan was not a drain step)."""

    write: bool
    foreign: bool
    interval: float
    live: frozenset[str] | None = None


def merge_attempts(attempts: Mapping[str, Attempt], removals: Iterable[Removal], results: Mapping[str, Attempt | None],
                   live: Collection[str]) -> dict[str, Attempt]:
    """The attempts after a step: each removal's result replaces its pod's entry (None forgets it), and
    pods no longer on the node (``live``: the uids still there) are forgotten."""
    merged = dict(attempts)
    for removal in removals:
        result = results.get(removal.uid)
        if result is None:
            merged.pop(removal.uid, None)
        else:
            merged[removal.uid] = result
    return {uid: a for uid, a in merged.items() if uid in live}


def next_try_in(attempts: Mapping[str, Attempt], clock: float) -> float | None:
    """Seconds until the earliest attempt may be tried again, so that a removal that failed is retried
    even when no watch reports anything meanwhile; None when nothing waits on time."""
    waits = [a.not_before - clock for a in attempts.values() if a.not_before > clock]
    return min(waits) if waits else None


def wait_seconds(recheck: float | None) -> float | None:
    """How long a step waits to look again at ``recheck`` (None: until a change): never less than SHORTEST_WAIT_SECONDS."""
    return None if recheck is None else max(recheck, SHORTEST_WAIT_SECONDS)


def sooner(a: float | None, b: float | None) -> float | None:
    """The earlier of two times to look again (None: never)."""
    return b if a is None else a if b is None else min(a, b)


def merge_refusals(known: Mapping[str, str], results: Mapping[str, str | None]) -> dict[str, str]:
    """Why hook Jobs were refused: a Job created since forgets its refusal (None), a refused one records why."""
    merged = {**known, **{name: why for name, why in results.items() if why is not None}}
    return {name: why for name, why in merged.items() if not (name in results and results[name] is None)}


def differs(stored: Mapping[str, Any], new: Mapping[str, Any], version: str) -> bool:
    """Whether a status differs from the one stored in what ``version`` holds (``lastUpdate`` aside)."""
    held = status_fields(version)
    return not status.same({k: v for k, v in stored.items() if k in held}, {k: v for k, v in new.items() if k in held})


def counted(memory: Memory, started: str | None, monotonic: float) -> float | None:
    """Seconds the drain that started at ``started`` has run at ``monotonic`` as this process counts them
    (``elapsed.seconds``' cap): None before it has seen that drain."""
    clock = memory.drain_clock
    if not started or clock is None or clock.started != timestamps.parse(started):
        return None
    return clock.elapsed + monotonic - clock.at


def shown(memory: Memory, observed: Mapping[str, Any], version: str) -> Memory:
    """The memory once the object shows ``observed``: a status sent whose answer never came, shown now, was applied. It
    is the status as last written, over what this process last heard back: a drain whose success was recorded so has
    succeeded (its clock is over, ``status.drained_once``), though the answer saying so was lost."""
    index = bookkeeping.applied(observed, memory.sent, version)
    if index is None:
        return memory
    ours = memory.sent[index]  # those sent after it may be applied after it: still waited for
    return replace(memory, stored=ours, written=(*memory.written, ours)[-RECENT_WRITES:], sent=memory.sent[index + 1:])


def seen(memory: Memory, decided: Mapping[str, Any], clock: Clock) -> Memory:
    """The memory with the drain a step's status records (``decided``) counted from ``clock``, the instant the step
    decided on, unless this process counts it already (a drain taken again, with a new drainStartTime, is counted anew)."""
    started = decided.get("drainStartTime")
    instant = timestamps.parse(str(started)) if started else None
    if instant is None or (memory.drain_clock is not None and memory.drain_clock.started == instant):
        return memory
    return replace(memory, drain_clock=DrainClock(instant, max(0.0, clock.wall - instant.timestamp()), clock.monotonic))


def remember(memory: Memory, plan: Plan, outcome: Outcome, clock: Clock, carried: Carried, version: str) -> tuple[Memory, float | None]:
    """The memory after ``plan`` was carried out and met ``outcome``, and when to look again (None: on a change only)."""
    memory = replace(memory, refused_jobs=merge_refusals(memory.refused_jobs, outcome.refused_jobs))
    if outcome.status_written:  # only what was sent tells our writes from someone else's (an empty one matches any)
        memory = replace(memory, written=(*memory.written, plan.status)[-RECENT_WRITES:], sent=())
    ended = plan.handback is not None and not outcome.status_failed  # its status stored: the node is given back now or next
    if ended:
        memory = replace(memory, stored=plan.status)
    if outcome.node_conflict:  # the node watch brings the node that changed; an ended maintenance reads it again at once
        return memory, None if plan.handback is None else 0.0
    if outcome.handback_held:  # ended, its node still to be given back: after a pause, the policies or the API may be away
        return memory, ERROR_RETRY_SECONDS
    if ended:
        memory = replace(memory, given_back=True)
    recheck = plan.recheck_in
    if carried.live is not None:
        attempts = merge_attempts(memory.attempts, plan.removals, outcome.attempts or {}, carried.live)
        memory = replace(memory, attempts=attempts)
        recheck = sooner(recheck, next_try_in(attempts, clock.wall))
    if outcome.status_failed:  # written again after a pause, not at once: the API server may be away
        if outcome.status_unanswered:  # it may be applied: known once the object shows it (``shown``)
            memory = replace(memory, sent=(*memory.sent, plan.status)[-RECENT_WRITES:])
        return memory, sooner(recheck, ERROR_RETRY_SECONDS)
    if carried.write or carried.foreign:
        memory = replace(memory, stored=plan.status, written_at=clock.monotonic)
    if not outcome.status_written and differs(memory.stored, plan.status, version):
        recheck = sooner(recheck, bookkeeping.next_write_in(memory.written_at, carried.interval, clock.monotonic))
    return memory, recheck

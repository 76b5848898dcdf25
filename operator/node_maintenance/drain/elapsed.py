"""How long a drain has run, as its timeout and its escalation ladder count it.

``drainStartTime`` is an instant on the wall clock, and the wall clock jumps: an NTP correction, a date set by hand.
Counted on the wall clock alone, a jump forward would bring the timeout and every step of the ladder at once, and pods
would be deleted past their budgets because a clock moved. So a drain has run what the wall clock says, but never longer
than this process has counted on its monotonic clock since it first saw the drain (starting from what the wall clock
said then: ``memory.DrainClock``). A jump back makes the drain's time later, never sooner: in doubt, it waits. A process
that starts (a restart, a new leader) has counted nothing yet: its first reckoning is its wall clock's, believed once.
"""

from __future__ import annotations

import datetime


def seconds(started: datetime.datetime, now: datetime.datetime, counted: float | None) -> float:
    """Seconds the drain started at ``started`` has run at ``now``: the wall clock's reckoning, capped by ``counted``,
    this process's count (None: none yet, as at the first step after a start)."""
    wall = (now - started).total_seconds()
    return wall if counted is None else min(wall, counted)

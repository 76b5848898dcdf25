"""The simulation's time: an event loop whose clock moves only when every task waits (``looptime``, the maintained
time-compacting loop by kopf's author), and a wall clock that follows it, offset by the jumps the simulation draws.

The operator reads the monotonic clock from its event loop and the wall clock from ``timestamps.now``; both are the
simulation's while a :class:`SimulatedTime` is in use, so a run is the same however fast the machine is.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Coroutine
from typing import Any, TypeVar

import looptime

from node_maintenance.api import timestamps

T = TypeVar("T")
EPOCH = datetime.datetime(2026, 1, 5, 8, 0, 0, tzinfo=datetime.UTC)  # a Monday morning


class SimulatedTime:
    """One run's loop and clocks. ``run`` carries a coroutine out on simulated time; ``advance`` lets every task run
    for that many simulated seconds; ``jump`` moves the wall clock alone, forward or back."""

    def __init__(self, start: datetime.datetime = EPOCH) -> None:
        self.loop = looptime.new_event_loop(start=0.0, noop_cycles=1)
        self.start = start
        self.offset = 0.0  # the wall clock's jumps so far, in seconds

    def now(self) -> datetime.datetime:
        """The wall clock: the start, plus the loop's time, plus the jumps."""
        return self.start + datetime.timedelta(seconds=self.loop.time() + self.offset)

    def jump(self, seconds: float) -> None:
        self.offset += seconds

    def __enter__(self) -> SimulatedTime:
        timestamps.use_clock(self.now)
        asyncio.set_event_loop(self.loop)
        return self

    def __exit__(self, *_: object) -> None:
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()
        asyncio.set_event_loop(None)
        timestamps.use_clock(None)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def advance(self, seconds: float) -> None:
        self.run(asyncio.sleep(seconds))

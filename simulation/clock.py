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
SPIN_LIMIT = 200_000  # loop iterations at one simulated instant: far beyond any step's work, so only a spin reaches it


class Spinning(Exception):
    """The loop ran SPIN_LIMIT iterations without its clock moving: some task never waits, so time would stand still
    forever (in a cluster: a core burnt and a maintenance that never finishes)."""


class SimulatedTime:
    """One run's loop and clocks. ``run`` carries a coroutine out on simulated time; ``advance`` lets every task run
    for that many simulated seconds; ``jump`` moves the wall clock alone, forward or back."""

    def __init__(self, start: datetime.datetime = EPOCH) -> None:
        self.loop = looptime.new_event_loop(start=0.0, noop_cycles=1)
        self.start = start
        self.offset = 0.0  # the wall clock's jumps so far, in seconds
        self._count_iterations()

    def _count_iterations(self) -> None:
        """Raise :class:`Spinning` out of the loop when its clock stands still too long; wraps the loop's one
        iteration, since a watchdog task of its own would itself keep the clock from moving."""
        # asyncio has no public hook around one loop iteration, nor a public list of what is ready to run.
        loop, iterate = self.loop, self.loop._run_once  # type: ignore[attr-defined]  # noqa: SLF001
        standing = {"at": -1.0, "iterations": 0}

        def counted() -> None:
            at = loop.time()
            standing["iterations"] = standing["iterations"] + 1 if at == standing["at"] else 0
            standing["at"] = at
            if standing["iterations"] > SPIN_LIMIT:
                standing["iterations"] = 0
                raise Spinning(f"{SPIN_LIMIT} loop iterations at {self.now():%H:%M:%S} with the clock standing still; "
                               f"ready: {', '.join(sorted({_task_name(h) for h in loop._ready}))}")  # type: ignore[attr-defined]  # noqa: SLF001
            iterate()

        loop._run_once = counted  # type: ignore[attr-defined]  # noqa: SLF001

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
        try:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except Spinning:
            pass  # a task that spins even when cancelled: the run has already failed on it
        self.loop.close()
        asyncio.set_event_loop(None)
        timestamps.use_clock(None)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def advance(self, seconds: float) -> None:
        self.run(asyncio.sleep(seconds))


def _task_name(handle: asyncio.Handle) -> str:
    """The name of the task a ready callback steps, or the callback itself."""
    callback = handle._callback  # type: ignore[attr-defined]  # noqa: SLF001
    owner = getattr(callback, "__self__", None)
    if not isinstance(owner, asyncio.Task):
        return repr(callback)
    frames = owner.get_stack(limit=1)
    where = f" at {frames[0].f_code.co_filename.rsplit('/', 1)[-1]}:{frames[0].f_lineno}" if frames else ""
    return f"{owner.get_name()} ({getattr(owner.get_coro(), '__qualname__', '?')}{where})"

"""Waiting on the cluster: poll a check, and fail with the log that explains why it never held."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Literal, TypeVar

from .processes import Process

T = TypeVar("T")
# Polls start quick, as most conditions hold within a second, and slow down to once a second: a check that
# runs kubectl costs about 0.1 s of CPU, and test processes polling at a fixed quick pace kept the
# machine's cores busy with kubectl alone.
FIRST_PAUSE_SECONDS = 0.2
LAST_PAUSE_SECONDS = 1.0


def pauses(first: float = FIRST_PAUSE_SECONDS, last: float = LAST_PAUSE_SECONDS) -> Iterator[float]:
    """The pauses between polls: ``first``, then half as long again each time, up to ``last``."""
    pause = first
    while True:
        yield pause
        pause = min(last, pause * 1.5)


def polls(timeout: float, pace: Iterable[float] | None = None) -> Iterator[None]:
    """Once per poll until ``timeout`` has passed, pausing between polls as ``pauses`` does (or by ``pace``):
    the loop of every wait, whatever it checks and however it fails. The last pause ends at the deadline,
    where one last poll happens."""
    deadline = time.monotonic() + timeout
    for pause in pauses() if pace is None else pace:
        yield
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(pause, left))


class ClusterError(RuntimeError):
    pass


def wait_for(what: str, check: Callable[[], T | Literal[False] | None], timeout: float, process: Process | None = None,
             details: Callable[[], str] | None = None, *, retrying: tuple[type[Exception], ...] = (),
             pace: Iterable[float] | None = None) -> T:
    """Poll ``check`` until it returns something truthy and return that; fail naming ``what``, with the
    log of ``process`` (which must stay alive meanwhile) or ``details``. A check that raises one of
    ``retrying`` (an API server away under a fault test) counts as not holding yet, and the last such
    failure is named if the wait times out."""
    failure: Exception | None = None
    for _ in polls(timeout, pace):
        if process is not None and not process.alive():
            raise ClusterError(f"{process.name} exited while waiting for {what}:\n{process.log_tail()}")
        try:
            result = check()
        except retrying as error:
            failure = error
            continue
        failure = None
        if result:
            return result
    tail = f"\n{process.log_tail()}" if process else f"\n{details()}" if details else ""
    failed = f"; the last check failed: {failure!r}" if failure else ""
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}{failed}{tail}")

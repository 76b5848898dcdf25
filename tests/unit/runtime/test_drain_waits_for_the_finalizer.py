"""A NodeMaintenance's drain starts only once kopf's finalizer is on it, so that deleting it always gives
the node back (the fault tests found a node left cordoned by one deleted before the finalizer landed)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import kopf

from node_maintenance.runtime import handlers
from tests.unit.builders import nm


class Untouched:
    """A memo the daemon must not use: using it would start the drain."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the drain started (memo.{name}) before the finalizer was on the NodeMaintenance")


class StoppedAfter:
    """kopf's DaemonStopped, set ``seconds`` from now."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 - the signature of kopf's DaemonStopped.wait
        await asyncio.sleep(timeout)
        return time.monotonic() >= self.at


def test_no_drain_starts_before_the_finalizer_is_on() -> None:
    body = nm("nm-1", "n1")  # kopf has not added its finalizer yet
    asyncio.run(asyncio.wait_for(handlers.maintain(body=cast(kopf.Body, body), stopped=cast(kopf.DaemonStopped, StoppedAfter(0.5)),
                                                   memo=cast(handlers.Memo, Untouched()), names=cast(kopf.Index[str, bool], {})), 5))

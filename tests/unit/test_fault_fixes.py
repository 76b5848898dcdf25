"""Faults the fault tests found: a node left cordoned by a NodeMaintenance deleted before kopf's finalizer
landed on it, and the NodeMaintenance that then took the node over recording that cordon as the node's own."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from node_maintenance.drain import node
from node_maintenance.runtime import handlers


class Untouched:
    """A memo the daemon must not use: using it would start the drain."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the drain started (memo.{name}) before the finalizer was on the NodeMaintenance")


class StoppedAfter:
    """kopf's DaemonStopped, set ``seconds`` from now."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    async def wait(self, timeout: float) -> bool:
        await asyncio.sleep(timeout)
        return time.monotonic() >= self.at


def test_no_drain_starts_before_the_finalizer_is_on() -> None:
    body = {"metadata": {"name": "nm-1"}, "spec": {"nodeName": "n1"}}  # kopf has not added its finalizer yet
    asyncio.run(asyncio.wait_for(handlers.maintain(body=body, stopped=StoppedAfter(0.5), memo=Untouched(), names={}), 5))


def test_taking_over_from_a_holder_that_is_gone_keeps_its_record() -> None:
    # nm-old took a schedulable node and vanished without giving it back; nm-new takes over.
    left = {"metadata": {"name": "n1", "resourceVersion": "7",
                         "annotations": {node.HOLDER: "nm-old", node.WAS_UNSCHEDULABLE: "false"}},
            "spec": {"unschedulable": True, "taints": [dict(node.TAINT)]}}
    patch = node.begin_patch(left, "nm-new")
    assert patch["metadata"]["annotations"] == {node.HOLDER: "nm-new"}  # the record stays "false"
    taken = {**left, "metadata": {**left["metadata"], "annotations": {node.HOLDER: "nm-new", node.WAS_UNSCHEDULABLE: "false"}}}
    assert node.will_uncordon(taken)

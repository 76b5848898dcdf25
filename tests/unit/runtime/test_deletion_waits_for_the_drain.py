"""Deleting a NodeMaintenance gives its node back only once its drain has ended, however kopf interleaves the daemon's
end and the deletion handler (the soak found a node left held by a deleted NodeMaintenance: the daemon, cancelled,
was still finishing a take when the deletion handler, finding the drain already being stopped, went on at once)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import kopf

from node_maintenance.runtime import handlers
from node_maintenance.runtime.engine import Engine, Shared
from tests.unit.builders import nm

IN_FLIGHT_SECONDS = 0.2  # how long the take sent before the cancellation takes to be answered


class Reached(Exception):
    """The deletion handler went on to give the node back; ``drain_ended`` says whether the drain had ended by then."""

    def __init__(self, drain_ended: bool) -> None:
        super().__init__(drain_ended)
        self.drain_ended = drain_ended


class GivingBack:
    """What the deletion handler reads to give the node back: reading it is the moment that matters here."""

    def __init__(self, ended: asyncio.Event) -> None:
        self.ended = ended

    def __getattr__(self, name: str) -> Any:
        raise Reached(self.ended.is_set())


async def _deleted_while_the_daemon_stops() -> bool:
    ended = asyncio.Event()

    async def draining() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(IN_FLIGHT_SECONDS)  # the engine ends only once the writes already sent are answered
            ended.set()
            raise

    task = asyncio.create_task(draining())
    await asyncio.sleep(0)
    memo = handlers.Memo(shared=cast(Shared, GivingBack(ended)), engines={"nm-1": handlers.Running(cast(Engine, None), task)})
    daemon_ends = asyncio.create_task(handlers.stop_drain(memo, "nm-1"))  # kopf cancelled the daemon: its end runs first
    await asyncio.sleep(0)
    try:
        await handlers.remove(body=cast(kopf.Body, nm("nm-1", "n1")), memo=memo)
    except Reached as reached:
        await daemon_ends
        return reached.drain_ended
    raise AssertionError("the deletion handler never read what gives the node back")


def test_the_node_is_given_back_only_after_a_drain_the_daemon_was_already_stopping() -> None:
    assert asyncio.run(_deleted_while_the_daemon_stops())

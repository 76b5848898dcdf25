"""Deleting a NodeMaintenance gives its node back only once its drain has ended, however the drain's end and the
deletion handler interleave (the soak found a node left held by a deleted NodeMaintenance: the drain, cancelled, was
still finishing a take when the deletion handler, finding the drain already being stopped, went on at once)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from node_maintenance.runtime.engine import Shared
from node_maintenance.runtime.maintenances import Maintenances, Running
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


async def _deleted_while_the_drain_stops() -> bool:
    ended = asyncio.Event()

    async def draining() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(IN_FLIGHT_SECONDS)  # the engine ends only once the writes already sent are answered
            ended.set()
            raise

    maintenances = Maintenances(cast(Shared, GivingBack(ended)))
    maintenances.running["nm-1"] = Running(nm("nm-1", "n1"), task=asyncio.create_task(draining()))
    await asyncio.sleep(0)
    first = asyncio.create_task(maintenances.stop_drain("nm-1"))  # another stop is under way: the second waits as long
    await asyncio.sleep(0)
    try:
        await maintenances.give_back(nm("nm-1", "n1"))
    except Reached as reached:
        await first
        return reached.drain_ended
    raise AssertionError("the deletion handler never read what gives the node back")


def test_the_node_is_given_back_only_after_a_drain_already_being_stopped_has_ended() -> None:
    assert asyncio.run(_deleted_while_the_drain_stops())

"""The simulation's clock: a task that never waits is a violation named by its task, not a run that hangs."""

from __future__ import annotations

import asyncio

import pytest

from simulation.run import Simulation


async def _spin() -> None:
    while True:  # noqa: ASYNC110 - the spin under test
        await asyncio.sleep(0)


async def _tick() -> None:
    while True:  # noqa: ASYNC110 - a task that wakes often, and waits each time
        await asyncio.sleep(0.01)


def test_a_task_that_never_lets_the_clock_move_is_a_violation_naming_it() -> None:
    with Simulation() as sim:
        sim.time.loop.create_task(_spin(), name="spinner")
        with pytest.raises(AssertionError, match=r"nothing spins: .*ready: .*spinner"):
            sim.step()
        assert any("nothing spins" in v for v in sim.violations)


def test_a_task_that_waits_however_often_lets_the_clock_move() -> None:
    with Simulation() as sim:
        sim.time.loop.create_task(_tick(), name="ticker")
        sim.run_for(30)
        assert sim.violations == []
        assert sim.time.loop.time() >= 30

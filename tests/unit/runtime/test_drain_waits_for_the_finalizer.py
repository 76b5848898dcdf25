"""A NodeMaintenance's drain starts only once kopf's finalizer is on it, so that deleting it always gives
the node back (the fault tests found a node left cordoned by one deleted before the finalizer landed)."""

from __future__ import annotations

from typing import Any, cast

from node_maintenance.runtime.engine import Shared
from node_maintenance.runtime.maintenances import Maintenances
from tests.unit.builders import nm


class Untouched:
    """What the engines share, which no engine may use: using it would start the drain."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the drain started (shared.{name}) before the finalizer was on the NodeMaintenance")


def test_no_drain_starts_before_the_finalizer_is_on() -> None:
    maintenances = Maintenances(cast(Shared, Untouched()))
    maintenances.ready = True
    maintenances.seen(nm("nm-1", "n1"))  # kopf has not added its finalizer yet
    maintenances.tell(None)
    assert maintenances.running == {}

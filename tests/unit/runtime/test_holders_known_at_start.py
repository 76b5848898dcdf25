"""An operator started while nodes are held takes none whose holder exists: no drain starts before every
NodeMaintenance's name has been listed, even those kopf has not shown yet (kopf shows a fleet's thousands one by one),
and a name counts as existing until both the names' watch and kopf have seen it go."""

from __future__ import annotations

import asyncio

import pytest

from node_maintenance.api.paths import nm_path, node_path
from node_maintenance.client.errors import ServerError
from node_maintenance.runtime.budget_watch import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.engine import Shared
from node_maintenance.runtime.maintenances import FINALIZER, Maintenances
from node_maintenance.runtime.metrics import Active
from tests.unit.builders import FakeApi, nm, node


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])  # an operator working in an older version, its CRD not upgraded yet
def test_no_drain_starts_before_every_holder_is_known_and_a_holder_exists_until_both_watches_saw_it_go(version: str) -> None:
    async def scenario() -> tuple[list[str], dict[str, bool], dict[str, bool]]:
        old, new = (nm(name, "n1", version=version, finalizers=[FINALIZER]) for name in ("nm-old", "nm-new"))
        api = FakeApi({node_path("n1"): node("n1", holder="nm-old", was_unschedulable=False, unschedulable=True),
                       nm_path("nm-old", version=version): old, nm_path("nm-new", version=version): new})
        api.fail("GET", nm_path(version=version), ServerError(503, "ServiceUnavailable", "the names are listed late", {}))
        shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), version, lambda *_: None)
        maintenances = Maintenances(shared)
        maintenances.seen(new)  # kopf shows the new one first; the old one holds n1
        running = asyncio.create_task(maintenances.run())
        try:
            async with asyncio.timeout(10):
                while not api.calls_to("GET", nm_path(version=version)):  # noqa: ASYNC110 - the listing signals nobody
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.1)  # the listing failed and is tried again in 0.5 s
                before_listed = list(maintenances.running)
                while "nm-new" not in maintenances.running:  # noqa: ASYNC110 - nor does an engine's start
                    await asyncio.sleep(0.01)
            names = ("nm-old", "nm-new", "nm-never")
            listed = {name: maintenances.exists(name) for name in names}
            maintenances.seen(new, deleted=True)  # kopf saw nm-new go; the names' watch has not yet
            return before_listed, listed, {name: maintenances.exists(name) for name in names}
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)

    before_listed, listed, after_kopf_saw_it_go = asyncio.run(scenario())
    assert before_listed == []
    assert listed == {"nm-old": True, "nm-new": True, "nm-never": False}
    assert after_kopf_saw_it_go == {"nm-old": True, "nm-new": True, "nm-never": False}

"""A NodeMaintenance gone without the deletion our finalizer guards (created and deleted while kopf could not reach the
API server: the soak's seed 1795887490) gets no deletion handler from kopf: its drain ends by itself, and the node
the drain took is given back as a deletion gives it back."""

from __future__ import annotations

import asyncio
from typing import Any

from node_maintenance.api.paths import nm_path, node_path
from node_maintenance.client.errors import NotFound
from node_maintenance.drain.nodes import HOLDER
from node_maintenance.runtime.budget_watch import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.engine import Shared
from node_maintenance.runtime.maintenances import FINALIZER, Maintenances
from node_maintenance.runtime.metrics import Active
from simulation.selectors import merged
from tests.unit.builders import FakeApi, runtime_nm, runtime_node


def test_a_maintenance_gone_without_its_deletion_has_the_node_its_drain_took_given_back() -> None:
    async def scenario() -> tuple[list[Any], dict[str, Any]]:
        path = node_path("n1")
        api = FakeApi({path: runtime_node("n1")})

        def stored(patch: dict[str, Any]) -> dict[str, Any]:
            api.objects[path] = merged(api.objects[path], patch)
            return api.objects[path]

        api.answer_by("PATCH", path, stored)
        api.fail("PATCH", nm_path("nm1", subresource="status"), NotFound(404, "NotFound", 'nodemaintenances "nm1" not found',
                                                                         {"kind": "nodemaintenances", "name": "nm1"}))
        shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), "v1beta1", lambda *_: None)
        shared.budgets.mirror.synced.set()  # no budget in this cluster
        body = runtime_nm("nm1", node="n1")
        body["metadata"]["finalizers"] = [FINALIZER]  # as kopf's event showed it before the object went
        maintenances = Maintenances(shared)
        maintenances.ready = True
        maintenances.seen(body)
        drain = maintenances.running["nm1"].task
        assert drain is not None
        async with asyncio.timeout(30):
            await drain  # its drain ends once the API answers that the object is gone
            await maintenances.giving_back["nm1"]
        return [(c.body.get("metadata") or {}).get("annotations", {}).get(HOLDER, "") for c in api.calls_to("PATCH", path)], api.objects[path]

    holders, node = asyncio.run(scenario())
    assert holders[0] == "nm1"  # taken
    assert holders[-1] is None  # given back: the holder record removed
    assert HOLDER not in (node["metadata"].get("annotations") or {}) and not node["spec"].get("unschedulable")
    assert not node["spec"].get("taints")

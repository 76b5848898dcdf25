"""Pod removals go through connections of their own: a take, a hand-back, a Lease or a status write is never queued
behind the hundreds of evictions that drains at once keep in flight (in a fleet of ten at once, a node's take
once waited 5.5 s for a connection)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from node_maintenance.api.paths import node_path, pod_path
from node_maintenance.client.async_http import MAX_REMOVAL_CONNECTIONS, AsyncKube
from node_maintenance.client.credentials import Credentials
from tests.unit.serving import serving


def test_a_node_patch_is_answered_while_every_removal_connection_is_busy() -> None:
    released, busy = asyncio.Event(), asyncio.Event()
    removing: list[str] = []

    async def evict(request: web.Request) -> web.Response:
        removing.append(request.match_info["name"])
        if len(removing) >= MAX_REMOVAL_CONNECTIONS:  # the removals' connections are all taken
            busy.set()
        await released.wait()  # every removal connection stays busy until the node patch is answered
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def patch(_request: web.Request) -> web.Response:
        return web.json_response({"metadata": {"name": "n1"}})

    async def scenario() -> None:
        routes = (web.post("/api/v1/namespaces/app/pods/{name}/eviction", evict), web.delete("/api/v1/namespaces/app/pods/{name}", evict),
                  web.patch(node_path("n1"), patch))
        async with serving(*routes) as url:
            kube = AsyncKube(Credentials(server=url))
            try:
                evictions = [asyncio.create_task(kube.request("POST", pod_path("app", f"web-{i}") + "/eviction", body={}))
                             for i in range(2 * MAX_REMOVAL_CONNECTIONS)]
                deletions = [asyncio.create_task(kube.request("DELETE", pod_path("app", f"job-{i}"))) for i in range(8)]
                await busy.wait()
                async with asyncio.timeout(10):  # not answered at all while the removals hold every connection
                    assert await kube.patch(node_path("n1"), {"spec": {"unschedulable": True}}) == {"metadata": {"name": "n1"}}
                assert not any(task.done() for task in evictions + deletions)
                released.set()
                await asyncio.gather(*evictions, *deletions)
                assert len(removing) == 2 * MAX_REMOVAL_CONNECTIONS + 8
            finally:
                await kube.close()

    asyncio.run(scenario())

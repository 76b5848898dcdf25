"""kopf's requests share a bounded pool of connections, like ours: a thousand NodeMaintenances created at once
(kopf adds its finalizer to each) do not open a connection each."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

from aiohttp import web

from node_maintenance.client.async_http import MAX_REQUEST_CONNECTIONS, AsyncKube
from node_maintenance.client.credentials import Credentials
from node_maintenance.runtime import handlers
from tests.unit.serving import serving

PATH = "/apis/nodemaintenance.kubevirt.io/v1beta1/nodemaintenances/nm"


def test_kopf_opens_at_most_as_many_connections_as_our_own_pool() -> None:
    peers: set[object] = set()

    async def answer(request: web.Request) -> web.Response:
        peers.add(request.transport)
        await asyncio.sleep(0.2)  # every request is in flight at once
        return web.json_response({})

    async def scenario() -> None:
        async with serving(web.route("*", PATH, answer)) as url:
            kube = AsyncKube(Credentials(server=url))
            login = await handlers.login(cast(handlers.Memo, SimpleNamespace(shared=SimpleNamespace(kube=kube))))
            try:
                async def patch() -> None:
                    async with login.aiohttp_session.patch(url + PATH, json={}) as response:
                        assert response.status == 200

                await asyncio.gather(*(patch() for _ in range(3 * MAX_REQUEST_CONNECTIONS)))
            finally:
                await login.aiohttp_session.close()
                await kube.close()

    asyncio.run(asyncio.wait_for(scenario(), 20))
    assert len(peers) == MAX_REQUEST_CONNECTIONS

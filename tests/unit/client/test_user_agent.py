"""Every request of a replica names the product, its version and the replica in its User-Agent, ours and
kopf's alike: the API server's audit log tells by it which replica sent what, around a change of leader."""

from __future__ import annotations

import asyncio
import re
from importlib import metadata
from types import SimpleNamespace
from typing import cast

from aiohttp import web

from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.config import user_agent
from node_maintenance.client.credentials import Credentials
from node_maintenance.client.http import Kube
from node_maintenance.runtime import handlers
from tests.unit.serving import serving

NODE = "/api/v1/nodes/n1"


def test_every_client_names_the_product_its_version_and_the_replica() -> None:
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("User-Agent", ""))
        return web.json_response({"metadata": {"name": "n1"}})

    async def scenario() -> None:
        async with serving(web.route("*", NODE, answer)) as url:
            kube = AsyncKube(Credentials(server=url, user_agent=user_agent("replica-7")))
            login = await handlers.login(cast(handlers.Memo, SimpleNamespace(shared=SimpleNamespace(kube=kube))))
            try:
                await kube.patch(NODE, {"spec": {"unschedulable": True}})  # the drain's requests
                await asyncio.to_thread(Kube(kube.credentials).request, "GET", NODE)  # leader election's and the webhooks'
                async with login.aiohttp_session.get(url + NODE) as response:  # kopf's
                    assert response.status == 200
            finally:
                await login.aiohttp_session.close()
                await kube.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))
    expected = f"node-maintenance-operator/{metadata.version('node-maintenance-operator')} (replica-7)"
    assert re.fullmatch(r"node-maintenance-operator/\d+\.\d+\.\d+ \(replica-7\)", expected)
    assert seen == [expected] * 3

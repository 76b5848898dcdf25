"""A replica that no longer leads sends no write: the sessions ours and kopf's requests go through refuse
every write before it leaves the process, once the reconciler's lead has ended, and still read."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from node_maintenance.client.config import Credentials
from node_maintenance.client.errors import NotLeading
from node_maintenance.client.http import AsyncKube
from tests.unit.serving import serving


def test_writes_are_refused_unsent_once_the_lead_has_ended() -> None:
    received: list[str] = []
    leading = [True]

    async def answer(request: web.Request) -> web.Response:
        received.append(request.method)
        return web.json_response({"metadata": {"name": "n1"}})

    async def scenario() -> None:
        async with serving(web.route("*", "/api/v1/nodes/n1", answer)) as url:
            kube = AsyncKube(Credentials(server=url), lambda: leading[0])
            try:
                await kube.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
                leading[0] = False
                assert await kube.get("/api/v1/nodes/n1") is not None  # reading is still allowed
                for method in ("PATCH", "POST", "PUT", "DELETE"):
                    with pytest.raises(NotLeading, match="no longer leads"):
                        await kube.request(method, "/api/v1/nodes/n1", body={})
            finally:
                await kube.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert received == ["PATCH", "GET"]  # nothing after the lead ended but the read

"""A replica that no longer leads sends no write: the sessions ours and kopf's requests go through refuse
every write before it leaves the process, once the reconciler's lead has ended, and still read."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from node_maintenance.api.paths import NODE_MAINTENANCE_CRD, nm_path
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.credentials import Credentials
from node_maintenance.client.errors import NotLeading
from node_maintenance.client.http import Kube
from node_maintenance.runtime.storage import migrate_storage_version
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


def test_the_storage_migration_stops_writing_once_the_lead_has_ended() -> None:
    # The migration runs in a thread, with the blocking client, before kopf starts: a lead lost in the middle of it
    # leaves the rest of its writes unsent.
    received: list[tuple[str, str]] = []
    leading = [True]
    items = [{"metadata": {"name": f"nm-{i}"}} for i in range(3)]

    async def answer(request: web.Request) -> web.Response:
        received.append((request.method, request.path))
        if request.method == "PUT":
            leading[0] = False  # the Lease renewal failed while the first object was written
        if request.path == NODE_MAINTENANCE_CRD:
            return web.json_response({"status": {"storedVersions": ["v1alpha1", "v1beta1"]}})
        if request.path == nm_path():
            return web.json_response({"items": items})
        return web.json_response(next(i for i in items if request.path == nm_path(i["metadata"]["name"])))

    async def scenario() -> None:
        async with serving(web.route("*", "/{tail:.*}", answer)) as url:
            kube = Kube(Credentials(server=url)).fenced(lambda: leading[0])
            with pytest.raises(NotLeading):
                await asyncio.to_thread(migrate_storage_version, kube)

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert [method for method, _ in received if method != "GET"] == ["PUT"]  # no second PUT, no storedVersions patch

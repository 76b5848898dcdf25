"""A watch whose connection goes silent ends, saying it fell silent (it resumes at once from where it stood): a connection dropped without a reset (a NAT or load balancer
forgetting it) sends nothing more, and only the silence tells. The API server sends a bookmark about
once a minute, so WATCH_INACTIVITY_SECONDS without a byte means the connection is gone."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from node_maintenance.client import async_http
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.credentials import Credentials
from node_maintenance.client.errors import Silent
from tests.unit.serving import serving

EVENT = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "5"}}}


def test_a_watch_silent_for_the_inactivity_timeout_raises_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_http, "WATCH_INACTIVITY_SECONDS", 0.5)
    opened: list[str] = []
    done = asyncio.Event()

    async def silent_after_one_event(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(json.dumps(EVENT).encode() + b"\n")
        await done.wait()  # the connection stays open and says nothing more, as a dropped one does
        return response

    async def scenario() -> list[dict[str, object]]:
        events: list[dict[str, object]] = []
        async with serving(web.get("/api/v1/pods", silent_after_one_event)) as url:
            kube = AsyncKube(Credentials(server=url))

            async def follow() -> None:
                async for event in kube.watch("/api/v1/pods", {"allowWatchBookmarks": "true"}, on_open=lambda: opened.append("open")):
                    events.append(event)

            try:
                with pytest.raises(Silent):
                    await follow()
            finally:
                done.set()
                await kube.close()
        return events

    events = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert events == [EVENT] and opened == ["open"]

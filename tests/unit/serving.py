"""A tiny HTTP server on 127.0.0.1 for the client tests: what the clients really send, over a real socket."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def serving(*routes: web.RouteDef) -> AsyncIterator[str]:
    """Serve ``routes`` on a free port until the block ends; yields the server's URL."""
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()

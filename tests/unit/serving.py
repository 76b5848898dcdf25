"""Servers on 127.0.0.1 for the tests: a tiny HTTP server for the client tests (what the clients really send, over a
real socket), and the operator's own webhook server over TLS."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from aiohttp import web

from devcluster.pki import generate_self_signed
from node_maintenance.client.protocol import BlockingKubeApi
from node_maintenance.webhooks.server import start_webhook_server


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


@contextlib.contextmanager
def webhooks_served(cert_dir: Path, kube: BlockingKubeApi) -> Iterator[tuple[int, ssl.SSLContext]]:
    """The operator's webhook server (API access ``kube``) on a free port, its event loop in a thread,
    until the block ends; yields the port and a client TLS context that trusts the server's certificate."""
    ca = generate_self_signed(cert_dir, ["127.0.0.1"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    runner = loop.run_until_complete(start_webhook_server(host="127.0.0.1", port=port, cert_dir=cert_dir, kube=kube))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, ssl.create_default_context(cadata=ca.decode())
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

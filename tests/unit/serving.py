"""Servers on 127.0.0.1 for the tests: a tiny HTTP server for the client tests (what the clients really send, over a
real socket), and the operator's own webhook server over TLS, with the one way the tests post to it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

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


OPERATOR_NAMESPACE = "nmo"  # where the served webhooks' operator runs, and no hook Job may


@contextlib.contextmanager
def webhooks_served(cert_dir: Path, kube: BlockingKubeApi, *, authorize: bool = False) -> Iterator[tuple[int, ssl.SSLContext]]:
    """The operator's webhook server (API access ``kube``) on a free port, its event loop in a thread,
    until the block ends; yields the port and a client TLS context that trusts the server's certificate."""
    ca = generate_self_signed(cert_dir, ["127.0.0.1"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    runner = loop.run_until_complete(start_webhook_server(host="127.0.0.1", port=port, cert_dir=cert_dir, kube=kube, namespace=OPERATOR_NAMESPACE,
                                                                authorize=authorize))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, ssl.create_default_context(cadata=ca.decode())
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def post(served: tuple[int, ssl.SSLContext], path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """POST ``body`` as JSON to ``path`` of the webhook server ``webhooks_served`` yields, as the API server does;
    the answer's status and body, whatever the status, so a test can hold a refusal to its code and its words.
    Every webhook test posts through here, so they all speak to the server alike and wait as long (30 s, for a
    loaded machine)."""
    port, context = served
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", data=body, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def review_response(served: tuple[int, ssl.SSLContext], path: str, review: dict[str, Any]) -> dict[str, Any]:
    """Post ``review`` (an AdmissionReview or a ConversionReview) to ``path`` and return the review's ``response``,
    having checked it came with a 200: the API server reads no other answer."""
    status, body = post(served, path, json.dumps(review).encode())
    assert status == 200, (status, body)
    response: dict[str, Any] = json.loads(body)["response"]
    return response

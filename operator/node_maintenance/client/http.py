"""Dict-in, dict-out access to the Kubernetes API.

The runtime works with plain JSON objects (as the API sends them and as the pure functions expect),
and says which patch type it sends instead of relying on a generated default. Failed requests raise
the typed errors of :mod:`node_maintenance.client.errors`: this module is the only place that knows
HTTP status codes and the HTTP libraries' exceptions.

``Kube`` is blocking (leader election, storage migration and admission run it in threads);
``AsyncKube`` serves the drain engine on the event loop, including watch streams, with the same
credentials. Both build a request and read its answer through the same two functions, and stand on
the standard library and aiohttp (which kopf brings): the official client would cost the process
about 20 MiB of imports for the few requests made here.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp

from node_maintenance.client.config import Credentials
from node_maintenance.client.errors import NotFound, Unreachable, api_error

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"
# Watch events are one JSON object a line; a line holds one whole object.
MAX_EVENT_BYTES = 16 * 1024 * 1024
MAX_REQUEST_CONNECTIONS = 64
REQUEST_TIMEOUT_SECONDS = 30.0
WATCH_CONNECT_TIMEOUT_SECONDS = 30.0
# What the HTTP libraries raise when no whole answer came back: the server is out of reach.
_NO_ANSWER = (OSError, asyncio.TimeoutError, http.client.HTTPException, aiohttp.ClientError)


@dataclass(frozen=True)
class Prepared:
    """One request as both clients send it."""

    path: str  # with the query string
    headers: dict[str, str]
    data: bytes | None


def prepare(credentials: Credentials, path: str, query: dict[str, str] | None, body: Any, content_type: str) -> Prepared:
    return Prepared(path + (f"?{urlencode(query)}" if query else ""), credentials.headers(content_type),
                    None if body is None else json.dumps(body).encode())


def answer(status: int, reason: str, data: bytes, retry_after: str | None) -> dict[str, Any]:
    """The decoded body of a successful answer; the typed error of any other."""
    if not 200 <= status < 300:
        raise api_error(status, reason, data.decode(errors="replace"), retry_after)
    try:
        decoded = json.loads(data) if data else {}
    except ValueError as error:  # a body cut short reads as broken JSON
        raise Unreachable(f"the answer could not be read: {error}") from None
    return decoded if isinstance(decoded, dict) else {}


def unreachable(error: BaseException) -> Unreachable:
    return Unreachable(str(error) or type(error).__name__)


class Kube:
    """Blocking requests, one connection each: leader election and admission make a few a second at most."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        # No proxy from the environment, as with kubectl's default for an in-cluster server.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                   urllib.request.HTTPSHandler(context=credentials.ssl_context()))

    def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                content_type: str = JSON, timeout: float = REQUEST_TIMEOUT_SECONDS) -> dict[str, Any]:
        prepared = prepare(self.credentials, path, query, body, content_type)
        request = urllib.request.Request(self.credentials.server + prepared.path, method=method, headers=prepared.headers,
                                         data=prepared.data)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return answer(response.status, str(response.reason), response.read(), None)
        except urllib.error.HTTPError as error:
            return answer(error.code, str(error.reason), error.read(), error.headers.get("Retry-After"))
        except _NO_ANSWER as error:
            raise unreachable(error) from None

    def get(self, path: str, **query: str) -> dict[str, Any] | None:
        """GET, with None for a missing object."""
        try:
            return self.request("GET", path, query=query or None)
        except NotFound:
            return None

    def patch(self, path: str, body: dict[str, Any], content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return self.request("PATCH", path, body=body, content_type=content_type)


class AsyncKube:
    """The same API access on the event loop (aiohttp), for the drain engine's requests and watches."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self._sessions: dict[bool, aiohttp.ClientSession] = {}

    def _session(self, watching: bool) -> aiohttp.ClientSession:
        """Watches hold their connection for minutes, so they get a pool of their own without a limit:
        sharing one bounded pool, enough open watches would leave no connection for a request."""
        session = self._sessions.get(watching)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(ssl=self.credentials.ssl_context(), limit=0 if watching else MAX_REQUEST_CONNECTIONS)
            session = self._sessions[watching] = aiohttp.ClientSession(self.credentials.server, connector=connector)
        return session

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()

    async def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                      content_type: str = JSON, timeout: float = REQUEST_TIMEOUT_SECONDS) -> dict[str, Any]:
        prepared = prepare(self.credentials, path, query, body, content_type)
        try:
            async with self._session(False).request(method, prepared.path, data=prepared.data, headers=prepared.headers,
                                                    timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                return answer(response.status, response.reason or "", await response.read(), response.headers.get("Retry-After"))
        except _NO_ANSWER as error:
            raise unreachable(error) from None

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.request("GET", path)
        except NotFound:
            return None

    async def patch(self, path: str, body: dict[str, Any], content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def watch(self, path: str, query: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request until the server ends it; an ERROR event raises its typed error."""
        prepared = prepare(self.credentials, path, {**query, "watch": "true"}, None, JSON)
        try:
            async with self._session(True).get(
                prepared.path, headers=prepared.headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=WATCH_CONNECT_TIMEOUT_SECONDS),
            ) as response:
                if response.status != 200:
                    answer(response.status, response.reason or "", await response.read(), None)
                while line := await response.content.readuntil(b"\n", max_size=MAX_EVENT_BYTES):
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise api_error(int(status.get("code") or 500), str(status.get("reason", "")), status)
                    yield event
        except _NO_ANSWER as error:
            raise unreachable(error) from None
        except ValueError as error:  # a line cut short
            raise Unreachable(f"a watch event could not be read: {error}") from None

"""Dict-in, dict-out access to the Kubernetes API on the event loop (aiohttp), for the drain engine's requests
and watches and kopf's session: the counterpart of :mod:`node_maintenance.client.http`'s blocking ``Kube``, built
and read through the same two functions, with the same credentials."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson

from node_maintenance.client.credentials import Credentials
from node_maintenance.client.errors import NotFound, NotLeading, Silent, Unreachable, api_error
from node_maintenance.client.http import JSON, MERGE_PATCH, READS, REQUEST_TIMEOUT_SECONDS, answer, prepare, unreachable

# Watch events are one JSON object a line; a line holds one whole object.
MAX_EVENT_BYTES = 16 * 1024 * 1024
# Fewer would cost less memory in a burst (with 16, 300 NodeMaintenances created at once grew the process by 27 MiB
# instead of 54), but a request's timeout counts its wait for a connection: 5,000 created at once had their status
# writes wait past it behind 16, tried again, and the queue slowed to a crawl.
MAX_REQUEST_CONNECTIONS = 64
# Pod removals (evictions, deletions) have a pool of their own: twenty drains keep hundreds in flight, and a take, a
# hand-back, a Lease or a status write queued behind them waited seconds for a connection (5.5 s in a fleet of ten at once).
MAX_REMOVAL_CONNECTIONS = 64
WATCH_CONNECT_TIMEOUT_SECONDS = 30.0
# The API server sends a bookmark about once a minute on a watch that asks for them; silence for longer
# means the connection is gone.
WATCH_INACTIVITY_SECONDS = 90.0
# What aiohttp raises when no whole answer came back: the server is out of reach.
_NO_ANSWER = (OSError, asyncio.TimeoutError, aiohttp.ClientError)


def client_session(credentials: Credentials, limit: int, headers: list[tuple[str, str]] | None = None,
                   may_write: Callable[[], bool] = lambda: True) -> aiohttp.ClientSession:
    """An aiohttp session to the server as the credentials describe it (TLS, proxy), for ours and kopf's
    requests; ``headers`` go with every request (ours send theirs per request, fresh). A write is refused
    (NotLeading) before it is sent whenever ``may_write`` says no: kopf's own writes included."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=credentials.ssl_context(), limit=limit),
                                 proxy=credentials.proxy, headers=headers, trace_configs=[_writes_fenced(may_write)])


def _writes_fenced(may_write: Callable[[], bool]) -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()

    async def on_request_start(_session: aiohttp.ClientSession, _context: Any, params: aiohttp.TraceRequestStartParams) -> None:
        if params.method not in READS and not may_write():
            raise NotLeading(f"{params.method} {params.url.path}: not sent, this replica no longer leads")

    trace.on_request_start.append(on_request_start)
    return trace


class Pool(enum.Enum):
    """Which connections a request takes."""

    REQUESTS = "requests"
    REMOVALS = "removals"
    WATCHES = "watches"


# How many connections each pool may hold open (0: no limit).
POOL_LIMITS = {Pool.REQUESTS: MAX_REQUEST_CONNECTIONS, Pool.REMOVALS: MAX_REMOVAL_CONNECTIONS, Pool.WATCHES: 0}


def pool_of(method: str, path: str) -> Pool:
    """A pod's eviction or deletion goes through the removals' pool, any other request through the requests' pool."""
    removal = (method == "POST" and path.endswith("/eviction")) or (method == "DELETE" and "/pods/" in path)
    return Pool.REMOVALS if removal else Pool.REQUESTS


class AsyncKube:
    """The same API access on the event loop (aiohttp), for the drain engine's requests and watches."""

    def __init__(self, credentials: Credentials, may_write: Callable[[], bool] = lambda: True) -> None:
        self.credentials = credentials
        self.may_write = may_write  # False once this replica no longer leads: every write is refused unsent
        self._sessions: dict[Pool, aiohttp.ClientSession] = {}

    def _session(self, pool: Pool) -> aiohttp.ClientSession:
        """Watches hold their connection for minutes, so they get a pool of their own without a limit:
        sharing one bounded pool, enough open watches would leave no connection for a request. Pod removals get
        one of their own too, so that a drain's hundreds in flight hold up no other request."""
        session = self._sessions.get(pool)
        if session is None or session.closed:
            session = self._sessions[pool] = client_session(self.credentials, POOL_LIMITS[pool], may_write=self.may_write)
        return session

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()

    async def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                      content_type: str = JSON, timeout: float = REQUEST_TIMEOUT_SECONDS) -> dict[str, Any]:
        prepared = prepare(self.credentials, path, query, body, content_type)
        try:
            async with self._session(pool_of(method, path)).request(method, prepared.url, data=prepared.data, headers=prepared.headers,
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

    async def watch(self, path: str, query: dict[str, str], on_open: Callable[[], None] | None = None) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request until the server ends it; an ERROR event raises its typed error, and
        WATCH_INACTIVITY_SECONDS without a byte (bookmarks included) raise Silent once the server had accepted the
        watch (Unreachable before): a connection dropped without a reset never ends otherwise. ``on_open`` is called
        once the server has accepted the watch."""
        prepared = prepare(self.credentials, path, {**query, "watch": "true"}, None, JSON)
        accepted = False
        try:
            async with self._session(Pool.WATCHES).get(
                prepared.url, headers=prepared.headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=WATCH_CONNECT_TIMEOUT_SECONDS, sock_read=WATCH_INACTIVITY_SECONDS),
            ) as response:
                if response.status != 200:
                    answer(response.status, response.reason or "", await response.read(), None)
                accepted = True
                if on_open:
                    on_open()
                while line := await response.content.readuntil(b"\n", max_size=MAX_EVENT_BYTES):
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise api_error(int(status.get("code") or 500), str(status.get("reason", "")), status)
                    yield event
        except TimeoutError as error:  # no byte for WATCH_INACTIVITY_SECONDS: silent once accepted
            raise (Silent(f"nothing heard for {WATCH_INACTIVITY_SECONDS:.0f}s") if accepted else unreachable(error)) from None
        except _NO_ANSWER as error:
            raise unreachable(error) from None
        except ValueError as error:  # a line cut short
            raise Unreachable(f"a watch event could not be read: {error}") from None

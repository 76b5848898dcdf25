"""Proxies the harness puts between clients and the API server, on 127.0.0.1:

- :class:`ConnectProxy`: a forward proxy that tunnels with HTTP CONNECT (what ``proxy-url`` and
  ``HTTPS_PROXY`` name);
- :class:`PrefixProxy`: a reverse proxy that serves the API under a path prefix, as Rancher's does, and
  answers 404 to anything outside it;
- :class:`FaultProxy`: a reverse proxy that injects faults at the HTTP level, which Toxiproxy (TCP) cannot:
  error answers to chosen requests for a while, and response streams (watches) that go silent, neither
  sending a byte nor closing, as a connection a NAT or load balancer forgot.

Each runs its own event loop in a thread and records what it carried, so a test can check that the
traffic really went through it and the fault really happened.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import aiohttp
from aiohttp import web

from .forward import pipe
from .processes import free_port

# Hop-by-hop headers a proxy does not pass on (RFC 9110, 7.6.1), and the ones aiohttp sets itself.
_NOT_FORWARDED = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host",
                  "content-length"}


class _Served(abc.ABC):
    """An asyncio server on a port of 127.0.0.1, run in a thread of its own."""

    def __init__(self) -> None:
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=type(self).__name__, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    @abc.abstractmethod
    async def _start(self) -> None: ...

    @abc.abstractmethod
    async def _stop(self) -> None: ...


class ConnectProxy(_Served):
    """Tunnels ``CONNECT host:port`` requests; ``tunnels`` lists the targets, one per tunnel opened."""

    def __init__(self) -> None:
        super().__init__()
        self.tunnels: list[str] = []
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for copying in self._pipes:
            copying.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readline()).decode(errors="replace").split()
        while (await reader.readline()).strip():  # the request's headers: a tunnel needs none of them
            pass
        if len(request) != 3 or request[0] != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        host, _, port = request[1].rpartition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        self.tunnels.append(request[1])
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            copying = asyncio.ensure_future(pipe(source, sink))
            self._pipes.add(copying)
            copying.add_done_callback(self._pipes.discard)


class _ReverseProxy(_Served):
    """Serves ``upstream`` (the API server, verified with ``ca_file``) over plain HTTP; each request goes to the
    upstream path :meth:`_route` gives, or is answered with the response it gives instead."""

    def __init__(self, upstream: str, ca_file: Path) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self._ca_file = ca_file
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._closing = asyncio.Event()  # set when the proxy stops: streams held silent end then
        self._handling: set[asyncio.Task[Any]] = set()  # requests under way, ended when the proxy stops

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(self._ca_file))))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        assert self._runner is not None and self._session is not None
        self._closing.set()
        for handling in list(self._handling):  # a watch waiting on the API server would hold the shutdown for a minute
            handling.cancel()
        await self._runner.cleanup()
        await self._session.close()

    @abc.abstractmethod
    def _route(self, request: web.Request) -> str | web.Response:
        """The upstream path and query to send ``request`` to, or the answer to give instead."""

    def _silenced(self, request: web.Request) -> asyncio.Event | None:
        """An event that silences the response to ``request`` once set (None: never silenced)."""
        return None

    def _ended(self, request: web.Request) -> None:
        """The response to ``request`` has ended."""

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handling.add(task)
        try:
            return await self._relay(request)
        finally:
            self._handling.discard(task)

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        route = self._route(request)
        if isinstance(route, web.Response):
            return route
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        try:
            body = await request.read()  # none is sent on as none: an empty one would get a content type the server refuses
            async with self._session.request(request.method, self.upstream + route, headers=headers, data=body or None,
                                             timeout=aiohttp.ClientTimeout(total=None)) as answer:
                response = web.StreamResponse(status=answer.status, reason=answer.reason)
                response.headers.update({k: v for k, v in answer.headers.items() if k.lower() not in _NOT_FORWARDED})
                await response.prepare(request)
                silenced = self._silenced(request)
                try:
                    with contextlib.suppress(ConnectionError):  # the client went away mid-stream (a watch it ended)
                        async for chunk in answer.content.iter_any():
                            if silenced is not None and silenced.is_set():
                                await self._closing.wait()  # no byte more, and no end: the connection is forgotten
                                break
                            await response.write(chunk)
                        await response.write_eof()
                finally:
                    self._ended(request)
                return response
        except aiohttp.ClientConnectionError as error:  # the API server away (a restart): what a gateway answers
            return web.Response(status=502, text=f"the API server could not be reached: {error}")


class PrefixProxy(_ReverseProxy):
    """Serves ``upstream`` under ``prefix``; ``paths`` lists every request's path as the client sent it."""

    def __init__(self, upstream: str, ca_file: Path, prefix: str) -> None:
        super().__init__(upstream, ca_file)
        self.prefix = prefix.rstrip("/")
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def _route(self, request: web.Request) -> str | web.Response:
        self.paths.append(request.path)
        if not request.path.startswith(self.prefix + "/"):
            return web.Response(status=404, text=f"nothing is served outside {self.prefix}/")
        return request.rel_url.path_qs[len(self.prefix):]


# Which requests a fault applies to: (method, path, query).
Matches = Callable[[str, str, Mapping[str, str]], bool]


@dataclass
class _Fault:
    matches: Matches
    status: int
    until: float  # on the monotonic clock


class FaultProxy(_ReverseProxy):
    """Serves ``upstream`` as it is, but for the faults a test asks for. ``injected`` counts the error answers
    given by status, ``silenced`` the response streams held silent."""

    def __init__(self, upstream: str, ca_file: Path) -> None:
        super().__init__(upstream, ca_file)
        self.injected: collections.Counter[int] = collections.Counter()
        self.silenced = 0
        self._faults: list[_Fault] = []
        self._streams: list[tuple[web.Request, asyncio.Event]] = []  # responses under way, and what silences each

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer_with(self, status: int, seconds: float, matches: Matches) -> None:
        """For ``seconds`` from now, answer the requests ``matches`` selects with ``status`` (a Status body, and
        Retry-After: 1 for a 429 or a 503), as the API server does under load; the streams of such requests
        under way end now, so their clients ask again."""
        self._loop.call_soon_threadsafe(self._answer_with, _Fault(matches, status, time.monotonic() + seconds))

    def silence(self, matches: Matches) -> None:
        """Hold the responses under way that ``matches`` selects silent from now on: not a byte more, no end."""
        self._loop.call_soon_threadsafe(self._silence, matches)

    def _answer_with(self, fault: _Fault) -> None:
        self._faults.append(fault)
        for request, _ in self._streams:
            if fault.matches(request.method, request.path, request.query) and request.transport is not None:
                request.transport.close()

    def _silence(self, matches: Matches) -> None:
        for request, silenced in self._streams:
            if not silenced.is_set() and matches(request.method, request.path, request.query):
                silenced.set()
                self.silenced += 1

    def _route(self, request: web.Request) -> str | web.Response:
        now = time.monotonic()
        self._faults = [f for f in self._faults if f.until > now]
        fault = next((f for f in self._faults if f.matches(request.method, request.path, request.query)), None)
        if fault is None:
            return request.rel_url.path_qs
        self.injected[fault.status] += 1
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": fault.status,
                  "message": f"injected by the harness's fault proxy ({fault.status})", "details": {"retryAfterSeconds": 1}}
        return web.json_response(status, status=fault.status, headers={"Retry-After": "1"})

    def _silenced(self, request: web.Request) -> asyncio.Event:
        silenced = asyncio.Event()
        self._streams.append((request, silenced))
        return silenced

    def _ended(self, request: web.Request) -> None:
        self._streams = [(r, e) for r, e in self._streams if r is not request]

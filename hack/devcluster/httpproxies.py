"""The two proxies that stand between admins and their API servers, on 127.0.0.1, for the kubeconfig tests:

- :class:`ConnectProxy`: a forward proxy that tunnels with HTTP CONNECT (what ``proxy-url`` and
  ``HTTPS_PROXY`` name);
- :class:`PrefixProxy`: a reverse proxy that serves the API under a path prefix, as Rancher's does, and
  answers 404 to anything outside it.

Each runs its own event loop in a thread and records what it carried, so a test can check that the
traffic really went through it.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import ssl
import threading
from pathlib import Path
from typing import Self

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


class PrefixProxy(_Served):
    """Serves ``upstream`` (the API server, verified with ``ca_file``) under ``prefix`` over plain HTTP;
    ``paths`` lists every request's path as the client sent it."""

    def __init__(self, upstream: str, ca_file: Path, prefix: str) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self.prefix = prefix.rstrip("/")
        self.paths: list[str] = []
        self._ca_file = ca_file
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(self._ca_file))))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        assert self._runner is not None and self._session is not None
        await self._runner.cleanup()
        await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        if not request.path.startswith(self.prefix + "/"):
            return web.Response(status=404, text=f"nothing is served outside {self.prefix}/")
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        async with self._session.request(request.method, self.upstream + request.rel_url.path_qs[len(self.prefix):],
                                         headers=headers, data=await request.read(),
                                         timeout=aiohttp.ClientTimeout(total=None)) as answer:
            response = web.StreamResponse(status=answer.status, reason=answer.reason)
            response.headers.update({k: v for k, v in answer.headers.items() if k.lower() not in _NOT_FORWARDED})
            await response.prepare(request)
            with contextlib.suppress(ConnectionError):  # the client went away mid-stream (a watch it ended)
                async for chunk in answer.content.iter_any():
                    await response.write(chunk)
            await response.write_eof()
            return response


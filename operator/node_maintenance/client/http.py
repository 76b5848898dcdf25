"""Dict-in, dict-out access to the Kubernetes API, blocking.

The runtime works with plain JSON objects (as the API sends them and as the pure functions expect),
and says which patch type it sends instead of relying on a generated default. Failed requests raise
the typed errors of :mod:`node_maintenance.client.errors`: this module and
:mod:`node_maintenance.client.async_http` are the only places that know HTTP status codes and the HTTP
libraries' exceptions.

``Kube`` is blocking (leader election, storage migration, admission and the kubectl plugin);
``AsyncKube`` (:mod:`node_maintenance.client.async_http`) serves the drain engine on the event loop,
including watch streams, with the same credentials. Both build a request and read its answer through the
same two functions here, and stand on the standard library and aiohttp (which kopf brings): the official
client would cost the process about 40 MiB of imports for the few requests made here. This one imports no
aiohttp, which would double the plugin's start. Both keep the server URL's path (a cluster behind a proxy
that serves it under a prefix), tunnel through the proxy the credentials name, and send repeated headers
(impersonated groups).
"""

from __future__ import annotations

import base64
import http.client
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

import orjson

from node_maintenance.client.credentials import Credentials
from node_maintenance.client.errors import NotFound, NotLeading, Unreachable, api_error
from node_maintenance.client.redaction import redact_url

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"
REQUEST_TIMEOUT_SECONDS = 30.0
# Methods that change nothing: allowed whoever leads.
READS = frozenset({"GET", "HEAD", "OPTIONS"})
# What the standard library raises when no whole answer came back: the server is out of reach.
_NO_ANSWER = (OSError, http.client.HTTPException)


@dataclass(frozen=True)
class Prepared:
    """One request as both clients send it."""

    url: str  # the server's URL, its path and the query string
    headers: list[tuple[str, str]]
    data: bytes | None


def prepare(credentials: Credentials, path: str, query: dict[str, str] | None, body: Any, content_type: str) -> Prepared:
    return Prepared(credentials.server + path + (f"?{urlencode(query)}" if query else ""), credentials.headers(content_type),
                    None if body is None else orjson.dumps(body))


def answer(status: int, reason: str, data: bytes, retry_after: str | None) -> dict[str, Any]:
    """The decoded body of a successful answer; the typed error of any other."""
    if not 200 <= status < 300:
        raise api_error(status, reason, data.decode(errors="replace"), retry_after)
    try:
        decoded = orjson.loads(data) if data else {}
    except ValueError as error:  # a body cut short reads as broken JSON
        raise Unreachable(f"the answer could not be read: {error}") from None
    return decoded if isinstance(decoded, dict) else {}


def unreachable(error: BaseException) -> Unreachable:
    """No answer, said in words that name no credential (an HTTP library's error may name the proxy's URL whole)."""
    return Unreachable(redact_url(str(error)) or type(error).__name__)


def _proxy_authorization(proxy: str) -> dict[str, str]:
    """The credentials a proxy URL carries (``http://user:password@host``), as a CONNECT request sends them."""
    parts = urlsplit(proxy)
    if parts.username is None:
        return {}
    secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return {"Proxy-Authorization": f"Basic {base64.b64encode(secret).decode()}"}


class Kube:
    """Blocking requests, one connection each: leader election and admission make a few a second at most."""

    def __init__(self, credentials: Credentials, may_write: Callable[[], bool] = lambda: True) -> None:
        self.credentials = credentials
        self.may_write = may_write  # False once the run it writes for no longer leads: every write is refused unsent
        self._context = credentials.ssl_context()

    def fenced(self, may_write: Callable[[], bool]) -> Kube:
        """The same access for one reconciler run, whose writes stop for good when ``may_write`` says no."""
        return Kube(self.credentials, may_write)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        """A connection to the server, or to the proxy with a tunnel (or, for an http:// server, a forward) to it."""
        target = urlsplit(self.credentials.server)
        secure = target.scheme == "https"
        port = target.port or (443 if secure else 80)
        proxy = urlsplit(self.credentials.proxy) if self.credentials.proxy else None
        host, dial = (proxy.hostname or "", proxy.port or 80) if proxy else (target.hostname or "", port)
        if not secure:
            return http.client.HTTPConnection(host, dial, timeout=timeout)
        connection = http.client.HTTPSConnection(host, dial, timeout=timeout, context=self._context)
        if self.credentials.proxy:
            connection.set_tunnel(target.hostname or "", port, headers=_proxy_authorization(self.credentials.proxy))
        return connection

    def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                content_type: str = JSON, timeout: float = REQUEST_TIMEOUT_SECONDS) -> dict[str, Any]:
        if method not in READS and not self.may_write():
            raise NotLeading(f"{method} {path}: not sent, this replica no longer leads")
        prepared = prepare(self.credentials, path, query, body, content_type)
        plain_forward = self.credentials.proxy and not prepared.url.startswith("https:")
        target = urlsplit(prepared.url)
        connection = self._connection(timeout)
        try:
            connection.putrequest(method, prepared.url if plain_forward else target.path + (f"?{target.query}" if target.query else ""))
            for name, value in prepared.headers:
                connection.putheader(name, value)
            if plain_forward and self.credentials.proxy:
                for name, value in _proxy_authorization(self.credentials.proxy).items():
                    connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(prepared.data or b"")))
            connection.endheaders(prepared.data)
            response = connection.getresponse()
            return answer(response.status, response.reason, response.read(), response.getheader("Retry-After"))
        except _NO_ANSWER as error:
            raise unreachable(error) from None
        finally:
            connection.close()

    def get(self, path: str, **query: str) -> dict[str, Any] | None:
        """GET, with None for a missing object."""
        try:
            return self.request("GET", path, query=query or None)
        except NotFound:
            return None

    def patch(self, path: str, body: dict[str, Any], content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return self.request("PATCH", path, body=body, content_type=content_type)

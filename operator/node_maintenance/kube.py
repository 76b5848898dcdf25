"""Dict-in, dict-out access to the Kubernetes API, through the official client's auth and TLS.

The runtime works with plain JSON objects (as the API sends them and as the pure functions
expect), and says which patch type it sends instead of relying on a generated default.
Failed requests raise typed errors (:class:`NotFound`, :class:`Conflict`, ...): this module is the
only place that knows HTTP status codes.

``Kube`` is blocking (leader election, storage migration, admission run it in threads); ``AsyncKube``
serves the drain engine on the event loop, including watch streams, with the same credentials.
"""

from __future__ import annotations

import json
import ssl
from typing import Any, AsyncIterator
from urllib.parse import quote

import aiohttp
from kubernetes import client, config

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# Watch events are one JSON object a line; a line holds one whole object.
MAX_EVENT_BYTES = 16 * 1024 * 1024
MAX_REQUEST_CONNECTIONS = 64


class ApiError(Exception):
    """A request the API server answered with an error; the subclasses say which kind."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{reason or 'error'} ({status}): {message}" if message else f"{reason or 'error'} ({status})")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    """The object (or the resource) does not exist."""


class Conflict(ApiError):
    """A stale resourceVersion or a failed precondition: decide again on fresh state."""


class Gone(ApiError):
    """A watch's resourceVersion is too old: list again."""


class TooManyRequests(ApiError):
    """Refused for now (a PodDisruptionBudget, or the server's own limits); ``retry_after`` in seconds."""

    def __init__(self, status: int, reason: str, message: str, retry_after: float = 0.0) -> None:
        super().__init__(status, reason, message)
        self.retry_after = retry_after


class Forbidden(ApiError):
    """RBAC refused the request."""


class Invalid(ApiError):
    """The request's body or parameters were refused as malformed."""


_KINDS: dict[int, type[ApiError]] = {400: Invalid, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 412: Conflict, 422: Invalid}


def api_error(status: int, reason: str, body: str | dict[str, Any], retry_after: str | None = None) -> ApiError:
    """The typed error for an answer; ``body`` is the Status object the server sent (text or parsed)."""
    if isinstance(body, str):
        try:
            body = json.loads(body) if body else {}
        except ValueError:
            body = {"message": body}
    message = str(body.get("message", "")) if isinstance(body, dict) else ""
    if status == 429:
        try:
            seconds = float(retry_after) if retry_after else 0.0
        except ValueError:
            seconds = 0.0
        details = body.get("details") if isinstance(body, dict) else None
        seconds = max(seconds, float((details or {}).get("retryAfterSeconds") or 0))
        return TooManyRequests(status, reason, message, seconds)
    return _KINDS.get(status, ApiError)(status, reason, message)


def load_api_client() -> client.ApiClient:
    """KUBECONFIG (or ~/.kube/config) when present, else the in-cluster ServiceAccount."""
    try:
        return config.new_client_from_config()
    except config.ConfigException:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)


class Kube:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> dict[str, Any]:
        _, url, headers, payload, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(method, url, header_params=headers, body=payload, _request_timeout=timeout)
        data = response.read()
        if not 200 <= response.status < 300:
            raise api_error(response.status, response.reason, data.decode(errors="replace"), response.getheader("Retry-After"))
        return json.loads(data) if data else {}

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

    def __init__(self, configuration: client.Configuration) -> None:
        self._configuration = configuration
        self._sessions: dict[bool, aiohttp.ClientSession] = {}

    def _ssl(self) -> ssl.SSLContext | bool:
        c = self._configuration
        if not c.verify_ssl:
            return False
        context = ssl.create_default_context(cafile=c.ssl_ca_cert)
        if c.cert_file:
            context.load_cert_chain(c.cert_file, c.key_file)
        return context

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        bearer = self._configuration.auth_settings().get("BearerToken")  # runs the token refresh hook
        if bearer and bearer.get("value"):
            headers["Authorization"] = bearer["value"]
        return headers

    def _session(self, watching: bool) -> aiohttp.ClientSession:
        """Watches hold their connection for minutes, so they get a pool of their own without a limit:
        sharing one bounded pool, enough open watches would leave no connection for a request."""
        session = self._sessions.get(watching)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl(), limit=0 if watching else MAX_REQUEST_CONNECTIONS)
            session = self._sessions[watching] = aiohttp.ClientSession(self._configuration.host, connector=connector)
        return session

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> dict[str, Any]:
        async with self._session(False).request(
            method, path, params=query, data=None if body is None else json.dumps(body),
            headers=self._headers(content_type), timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            data = await response.read()
            if not 200 <= response.status < 300:
                raise api_error(response.status, response.reason or "", data.decode(errors="replace"), response.headers.get("Retry-After"))
            return json.loads(data) if data else {}

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.request("GET", path)
        except NotFound:
            return None

    async def patch(self, path: str, body: dict[str, Any], content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def watch(self, path: str, query: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request until the server ends it; an ERROR event raises its typed error."""
        async with self._session(True).get(
            path, params={**query, "watch": "true"}, headers=self._headers("application/json"),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        ) as response:
            if response.status != 200:
                data = await response.read()
                raise api_error(response.status, response.reason or "", data.decode(errors="replace"))
            while line := await response.content.readuntil(b"\n", max_size=MAX_EVENT_BYTES):
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise api_error(int(status.get("code") or 500), str(status.get("reason", "")), status)
                yield event


def node_path(name: str = "") -> str:
    return f"/api/v1/nodes/{quote(name)}" if name else "/api/v1/nodes"


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"


def nm_path(name: str = "", *, version: str = "v1beta1", subresource: str = "") -> str:
    from .api import GROUP, PLURAL

    path = f"/apis/{GROUP}/{version}/{PLURAL}"
    if name:
        path += f"/{quote(name)}"
    if subresource:
        path += f"/{subresource}"
    return path

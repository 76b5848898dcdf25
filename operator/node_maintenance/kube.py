"""Dict-in, dict-out access to the Kubernetes API, with credentials read as kubectl reads them.

The runtime works with plain JSON objects (as the API sends them and as the pure functions
expect), and says which patch type it sends instead of relying on a generated default.
Failed requests raise typed errors (:class:`NotFound`, :class:`Conflict`, ...): this module is the
only place that knows HTTP status codes.

``Kube`` is blocking (leader election, storage migration, admission run it in threads); ``AsyncKube``
serves the drain engine on the event loop, including watch streams, with the same credentials. Both
stand on the standard library and aiohttp (which kopf brings): the official client would cost the
process about 20 MiB of imports for the few requests made here.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterator
from urllib.parse import quote, urlencode

import aiohttp
import yaml

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# Watch events are one JSON object a line; a line holds one whole object.
MAX_EVENT_BYTES = 16 * 1024 * 1024
MAX_REQUEST_CONNECTIONS = 64
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    """No usable kubeconfig or ServiceAccount; the message names the file and entry, and the fix."""


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how this process proves who it is."""

    server: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    insecure: bool = False
    token: str | None = None
    token_file: str | None = None  # read at each use: a ServiceAccount's token is rotated in place
    cert_file: str | None = None
    cert_data: str | None = None  # PEM
    key_file: str | None = None
    key_data: str | None = None  # PEM

    def bearer(self) -> str | None:
        if self.token_file:
            return Path(self.token_file).read_text().strip() or None
        return self.token

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file or self.cert_data:
            with _as_file(self.cert_file, self.cert_data) as cert, _as_file(self.key_file, self.key_data) as key:
                context.load_cert_chain(cert, key)
        return context

    def headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if token := self.bearer():
            headers["Authorization"] = f"Bearer {token}"
        return headers


@contextlib.contextmanager
def _as_file(path: str | None, data: str | None) -> Iterator[str | None]:
    """A path for a PEM given inline (the ssl module loads certificates from files only)."""
    if path or not data:
        yield path
        return
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as handle:
        handle.write(data)
        handle.flush()
        yield handle.name


def load_credentials(kubeconfig: str | None = None, context: str | None = None) -> Credentials:
    """The kubeconfig named, else the first file of $KUBECONFIG, else ~/.kube/config, as kubectl reads
    them; without any, the pod's ServiceAccount."""
    path = kubeconfig or next((p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p), "~/.kube/config")
    file = Path(path).expanduser()
    if kubeconfig or context or file.exists():
        return _from_kubeconfig(file, context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return Credentials(f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}",
                           ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"), token_file=str(SERVICE_ACCOUNT_DIR / "token"))
    raise ConfigError(f"no kubeconfig at {file} and not in a pod; set KUBECONFIG or pass --kubeconfig")


def _from_kubeconfig(file: Path, context: str | None) -> Credentials:
    try:
        config = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read kubeconfig {file} ({error}); set KUBECONFIG or pass --kubeconfig naming a readable one") from None

    def entry(kind: str, name: str | None) -> dict[str, Any]:
        for item in config.get(kind) or []:
            if item.get("name") == name:
                return item.get(kind[:-1]) or {}
        raise ConfigError(f"kubeconfig {file} has no {kind[:-1]} named {name!r}; check its {kind} or pick another context")

    chosen = entry("contexts", context or config.get("current-context"))
    cluster = entry("clusters", chosen.get("cluster"))
    user = entry("users", chosen["user"]) if chosen.get("user") else {}
    for plugin in ("exec", "auth-provider"):
        if plugin in user:
            raise ConfigError(f"kubeconfig {file}: user {chosen['user']!r} logs in through an {plugin} plugin, which is not "
                              "supported; use a token or a client certificate")
    if not cluster.get("server"):
        raise ConfigError(f"kubeconfig {file}: cluster {chosen.get('cluster')!r} has no server")

    def path(section: dict[str, Any], key: str) -> str | None:
        return str(file.parent / Path(section[key]).expanduser()) if section.get(key) else None  # relative to the file

    def pem(section: dict[str, Any], key: str) -> str | None:
        return base64.b64decode(section[key]).decode() if section.get(key) else None

    return Credentials(cluster["server"], ca_file=path(cluster, "certificate-authority"), ca_data=pem(cluster, "certificate-authority-data"),
                       insecure=bool(cluster.get("insecure-skip-tls-verify")), token=user.get("token"), token_file=path(user, "tokenFile"),
                       cert_file=path(user, "client-certificate"), cert_data=pem(user, "client-certificate-data"),
                       key_file=path(user, "client-key"), key_data=pem(user, "client-key-data"))


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


class Unauthorized(ApiError):
    """The credentials were refused (an expired token, a wrong certificate)."""


class Forbidden(ApiError):
    """RBAC refused the request."""


class Invalid(ApiError):
    """The request's body or parameters were refused as malformed."""


_KINDS: dict[int, type[ApiError]] = {400: Invalid, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 412: Conflict, 422: Invalid}


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


class Kube:
    """Blocking requests, one connection each: leader election and admission make a few a second at most."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        # No proxy from the environment, as with kubectl's default for an in-cluster server.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                   urllib.request.HTTPSHandler(context=credentials.ssl_context()))

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
        url = self.credentials.server + path + (f"?{urlencode(query)}" if query else "")
        request = urllib.request.Request(url, method=method, headers=self.credentials.headers(content_type),
                                         data=None if body is None else json.dumps(body).encode())
        try:
            with self._opener.open(request, timeout=timeout) as response:
                data = response.read()
        except urllib.error.HTTPError as error:
            raise api_error(error.code, str(error.reason), error.read().decode(errors="replace"), error.headers.get("Retry-After")) from None
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
            headers=self.credentials.headers(content_type), timeout=aiohttp.ClientTimeout(total=timeout),
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
            path, params={**query, "watch": "true"}, headers=self.credentials.headers("application/json"),
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

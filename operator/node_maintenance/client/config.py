"""Where the API server is and how this process proves who it is: a kubeconfig, read by the official
client's loader with kubectl's semantics (:mod:`node_maintenance.client.kubeconfig`), or the pod's
ServiceAccount."""

from __future__ import annotations

import os
import socket
import ssl
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit

from node_maintenance.client.errors import ConfigError
from node_maintenance.client.redaction import redact_url

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = "~/.kube/config"
TOKEN_RELOAD_SECONDS = 60.0  # as client-go's cached file token source
PRODUCT = "node-maintenance-operator"  # the distribution's name (pyproject.toml)


def user_agent(identity: str) -> str:
    """The User-Agent of a replica's every request, by which the API server's audit log tells replicas apart:
    the product, the installed distribution's version (releases.yaml's, through setup.py) and ``identity``."""
    return f"{PRODUCT}/{metadata.version(PRODUCT)} ({identity})"


@dataclass(frozen=True)
class Impersonation:
    """Whom the requests act as (kubectl's ``--as`` and ``--as-group``)."""

    user: str | None = None
    groups: tuple[str, ...] = ()

    def headers(self) -> list[tuple[str, str]]:
        if not self.user:
            return []
        return [("Impersonate-User", self.user), *(("Impersonate-Group", group) for group in self.groups)]


def _no_authorization() -> str | None:
    return None


def _never() -> datetime | None:
    return None


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how this process proves who it is."""

    server: str  # the URL the API is served under, its path included
    authorization: Callable[[], str | None] = _no_authorization  # the Authorization header, fresh at each call
    expires: Callable[[], datetime | None] = _never  # when the current authorization ends, if known
    ca_file: str | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    tls_server_name: str | None = None
    proxy: str | None = None  # an http:// proxy that tunnels to the server (CONNECT)
    impersonation: Impersonation = field(default_factory=Impersonation)
    user_agent: str | None = None  # what the requests call this process (:func:`user_agent`)

    def ssl_context(self) -> ssl.SSLContext:
        context = _ServerNameContext(ssl.PROTOCOL_TLS_CLIENT)
        context.server_name = self.tls_server_name
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_file:
            context.load_verify_locations(cafile=self.ca_file)
        else:
            context.load_default_certs()
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def identity(self) -> list[tuple[str, str]]:
        """Who is asking: a list, not a dict, because impersonating several groups repeats a header."""
        authorization = self.authorization()
        return [*self.impersonation.headers(), *([("Authorization", authorization)] if authorization else []),
                *([("User-Agent", self.user_agent)] if self.user_agent else [])]

    def headers(self, content_type: str) -> list[tuple[str, str]]:
        return [("Accept", "application/json"), ("Content-Type", content_type), *self.identity()]


class _ServerNameContext(ssl.SSLContext):
    """Checks the server's certificate for ``server_name`` instead of the URL's host (``tls-server-name``),
    on blocking sockets and on the event loop's TLS alike."""

    server_name: str | None = None

    def wrap_socket(self, sock: socket.socket, server_side: bool = False, do_handshake_on_connect: bool = True,
                    suppress_ragged_eofs: bool = True, server_hostname: str | bytes | None = None,
                    session: ssl.SSLSession | None = None) -> ssl.SSLSocket:
        return super().wrap_socket(sock, server_side, do_handshake_on_connect, suppress_ragged_eofs,
                                   self.server_name or server_hostname, session)

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, server_side: bool = False,
                 server_hostname: str | bytes | None = None, session: ssl.SSLSession | None = None) -> ssl.SSLObject:
        return super().wrap_bio(incoming, outgoing, server_side, self.server_name or server_hostname, session)


def proxy_for(server: str, proxy_url: str | None) -> str | None:
    """The proxy as kubectl picks it: the kubeconfig's ``proxy-url``, else the environment's proxy for the
    server's scheme unless ``NO_PROXY`` names the server."""
    if proxy_url:
        chosen = proxy_url
    else:
        environment = urllib.request.getproxies_environment()
        target = urlsplit(server)
        if urllib.request.proxy_bypass_environment(target.hostname or "", environment):  # type: ignore[attr-defined]
            return None
        chosen = environment.get(target.scheme) or ""
    if chosen and urlsplit(chosen).scheme != "http":
        raise ConfigError(f"proxy {redact_url(chosen)!r}: only http:// proxies are supported; name an HTTP CONNECT proxy")
    return chosen or None


def kubeconfig_paths(kubeconfig: str | None = None, context: str | None = None) -> str | None:
    """The kubeconfig files that apply, as kubectl picks them: the one named, else $KUBECONFIG's list,
    else ~/.kube/config; None when none exists and none was asked for (then the pod's ServiceAccount)."""
    paths = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    exists = any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p)
    return paths if kubeconfig or context or exists else None


def load_credentials(kubeconfig: str | None = None, context: str | None = None,
                     impersonation: Impersonation | None = None) -> Credentials:
    """The credentials of the kubeconfig that applies; without one, the pod's ServiceAccount."""
    if (paths := kubeconfig_paths(kubeconfig, context)) is not None:
        from node_maintenance.client import kubeconfig as loader  # the official client: only outside a pod

        return loader.load(paths, context, impersonation)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return Credentials(server, authorization=ServiceAccountToken(SERVICE_ACCOUNT_DIR / "token"), ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
                           proxy=proxy_for(server, None), impersonation=impersonation or Impersonation())
    raise ConfigError(f"no kubeconfig at {kubeconfig or os.environ.get('KUBECONFIG') or DEFAULT_KUBECONFIG} and not in a pod; "
                      "set KUBECONFIG or pass --kubeconfig")


class ServiceAccountToken:
    """The pod's ServiceAccount token as an Authorization header. The kubelet rotates the file in place well before
    the token expires; like client-go's cached file token source, it is read again once TOKEN_RELOAD_SECONDS have
    passed, not at every request (a read per eviction showed in the drain's profile)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._header: str | None = None
        self._read_at: float | None = None

    def __call__(self) -> str | None:
        if self._read_at is None or time.monotonic() - self._read_at >= TOKEN_RELOAD_SECONDS:
            try:
                token = self.path.read_text().strip()
            except OSError as error:
                raise ConfigError(f"cannot read the ServiceAccount token ({error}); mount the pod's ServiceAccount token") from None
            self._header, self._read_at = (f"Bearer {token}" if token else None), time.monotonic()
        return self._header



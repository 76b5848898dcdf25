"""What a request carries to the API server and through which proxy: the server, the TLS context, the
Authorization header and the impersonation. :mod:`node_maintenance.client.config` finds them (a kubeconfig through
:mod:`node_maintenance.client.kubeconfig`, or the pod's ServiceAccount); :mod:`node_maintenance.client.http` and :mod:`node_maintenance.client.async_http` send them."""

from __future__ import annotations

import socket
import ssl
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

from node_maintenance.client.errors import ConfigError
from node_maintenance.client.redaction import redact_url


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
    user_agent: str | None = None  # what the requests call this process (:func:`node_maintenance.client.config.user_agent`)

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

"""Toxiproxy (built from its pinned Go module) between a client and the API server, driven over its HTTP API.

Fault tests put it in front of kube-apiserver and hand the operator a kubeconfig that points at the
proxy; toxics then add latency, reset connections or black the link out while the operator works.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import toolchain
from .processes import Process, free_port
from .waiting import ClusterError, wait_for


class ToxiproxyError(ClusterError):
    """The proxy's API refused a request: a fault could not be injected."""


class Toxiproxy:
    """One toxiproxy server on 127.0.0.1; use as a context manager."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        self.process: Process | None = None

    def __enter__(self) -> Toxiproxy:
        self.process = Process("toxiproxy", [str(toolchain.binary("toxiproxy")), "-host", "127.0.0.1", "-port", str(self.port)], self.log_dir)
        try:
            wait_for("toxiproxy API", lambda: self._ok("/version"), 30, self.process)
        except BaseException:
            self.process.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.stop()

    def _ok(self, path: str) -> bool:
        try:
            self.call("GET", path)
            return True
        except (ToxiproxyError, OSError):
            return False

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.api + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise ToxiproxyError(f"toxiproxy {method} {path} failed ({error.code}): {error.read().decode(errors='replace')}") from None
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream: str) -> Proxy:
        """A new proxy listening on a free port of 127.0.0.1 and forwarding to ``upstream`` (host:port)."""
        listen = f"127.0.0.1:{free_port()}"
        self.call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return Proxy(self, name, listen)


class Proxy:
    """One proxied link; each fault method checks the proxy took it, or raises :class:`ToxiproxyError`."""

    def __init__(self, server: Toxiproxy, name: str, listen: str) -> None:
        self.server = server
        self.name = name
        self.listen = listen
        self.injected: dict[str, int] = {}  # fault kind -> times injected

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = self.server.call("GET", f"/proxies/{self.name}")
        return state

    def toxics(self) -> list[dict[str, Any]]:
        return self.server.call("GET", f"/proxies/{self.name}/toxics") or []

    def add_toxic(self, kind: str, attributes: dict[str, Any], *, stream: str = "downstream", name: str | None = None) -> str:
        name = name or f"{kind}-{stream}"
        self.server.call("POST", f"/proxies/{self.name}/toxics",
                         {"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes})
        if name not in {t["name"] for t in self.toxics()}:
            raise ToxiproxyError(f"toxic {name} not listed on proxy {self.name} after adding it")
        self.injected[kind] = self.injected.get(kind, 0) + 1
        return name

    def remove_toxic(self, name: str) -> None:
        self.server.call("DELETE", f"/proxies/{self.name}/toxics/{name}")

    def delete(self) -> None:
        """Remove the proxy: its connections close, and its name and port are free again."""
        self.server.call("DELETE", f"/proxies/{self.name}")

    @contextlib.contextmanager
    def toxic(self, kind: str, attributes: dict[str, Any], *, stream: str = "downstream") -> Iterator[str]:
        name = self.add_toxic(kind, attributes, stream=stream)
        try:
            yield name
        finally:
            self.remove_toxic(name)

    def set_enabled(self, enabled: bool) -> None:
        """Disabled, the proxy closes every connection and refuses new ones: the API server is gone for the client."""
        self.server.call("POST", f"/proxies/{self.name}", {"enabled": enabled})
        if self.state()["enabled"] is not enabled:
            raise ToxiproxyError(f"proxy {self.name} did not become {'enabled' if enabled else 'disabled'}")
        if not enabled:
            self.injected["blackout"] = self.injected.get("blackout", 0) + 1

    def reset_connections(self, hold: float = 2.0) -> None:
        """Reset (TCP RST) every connection that carries data within ``hold`` seconds, watches included,
        then let connections through again. Toxiproxy resets a link when its next data passes."""
        with self.toxic("reset_peer", {"timeout": 0}):
            time.sleep(hold)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Drop every byte both ways while connections stay open and new ones are accepted: a link that hangs
        without a reset (a partition), which only the client's own deadlines end. Requests first, then answers."""
        with self.toxic("timeout", {"timeout": 0}, stream="upstream"), self.toxic("timeout", {"timeout": 0}):
            yield

    @contextlib.contextmanager
    def blackout(self) -> Iterator[None]:
        self.set_enabled(False)
        try:
            yield
        finally:
            self.set_enabled(True)

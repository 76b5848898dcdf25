"""`nmo-pack images` asks the registry before it builds anything: a wrong --registry fails in a second, naming the
flag, while a registry that answers at all (a login asked for, a plain-HTTP one when TLS is not verified) goes on."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from node_maintenance_packaging.errors import PackagingError
from node_maintenance_packaging.images import build_images
from node_maintenance_packaging.imagetool import registry_host, unanswered


class _AsksForLogin(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def plain_http_registry() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AsksForLogin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}/org"
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("registry", "host"), [
    ("quay.io/org", "quay.io"), ("localhost/org", "localhost"), ("127.0.0.1:5000/a/b", "127.0.0.1:5000"), ("org/team", "registry-1.docker.io")])
def test_the_host_pushed_to_is_read_as_image_references_are(registry: str, host: str) -> None:
    assert registry_host(registry) == host


def test_a_registry_that_asks_for_a_login_answers(plain_http_registry: str) -> None:
    assert unanswered(plain_http_registry, tls_verify=False) == ""


def test_a_plain_http_registry_answers_a_tls_handshake_too(plain_http_registry: str) -> None:
    """Asked over TLS, it answers the handshake in plain HTTP: an answer all the same (the push says what is wrong)."""
    assert unanswered(plain_http_registry, tls_verify=True) == ""


def test_nothing_is_built_when_nothing_answers(tmp_path: Path) -> None:
    """Asked first: ``tmp_path`` has no releases.yaml, so anything read or built before would fail otherwise."""
    registry = f"127.0.0.1:{_closed_port()}/nmo"
    with pytest.raises(PackagingError) as raised:
        build_images(tmp_path, registry=registry, opm_image="example.org/opm:1", tls_verify=False)
    assert str(raised.value).startswith(f"pushing {registry}/: nothing answers at {registry.split('/')[0]} (")
    assert "check --registry" in str(raised.value)

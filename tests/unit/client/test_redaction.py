"""Credentials in a URL are never printed: every URL a message names shows ``***`` for its user and password."""

from __future__ import annotations

import pytest

from node_maintenance.client.http import unreachable
from node_maintenance.client.redaction import redact_url


@pytest.mark.parametrize(
    "text, shown",
    [
        ("https://user:password@proxy.example:3128", "https://***@proxy.example:3128"),
        ("http://token@host/path?q=1", "http://***@host/path?q=1"),
        ("http://user:p@ss/w0rd@host:80/x", "http://***@host:80/x"),  # a password written unescaped
        ("proxy 'http://a:b@h:1': refused, then 'https://c:d@i:2'", "proxy 'http://***@h:1': refused, then 'https://***@i:2'"),
        ("https://host:6443/api and mail@example.com", "https://host:6443/api and mail@example.com"),
    ],
)
def test_credentials_in_urls_are_redacted(text: str, shown: str) -> None:
    assert redact_url(text) == shown


def test_an_unreachable_server_is_named_without_credentials() -> None:
    assert str(unreachable(OSError("cannot connect through http://admin:s3cret@proxy:3128"))) == "cannot connect through http://***@proxy:3128"

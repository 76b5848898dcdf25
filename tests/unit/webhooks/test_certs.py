"""Serving certificates are reloaded when rotated, and only then."""

from __future__ import annotations

import os
from pathlib import Path

from devcluster.pki import generate_self_signed
from node_maintenance.webhooks.certs import CERT_FILE, ReloadingTLS


def test_reload_only_when_the_files_change(tmp_path: Path) -> None:
    generate_self_signed(tmp_path, ["127.0.0.1"])
    tls = ReloadingTLS(tmp_path)
    assert tls.reload() is False
    first = (tmp_path / CERT_FILE).read_bytes()
    generate_self_signed(tmp_path, ["127.0.0.1"])
    os.utime(tmp_path / CERT_FILE, (1, 1))  # a distinct mtime even within one clock tick
    assert (tmp_path / CERT_FILE).read_bytes() != first
    assert tls.reload() is True and tls.reload() is False

"""Serving certificates are reloaded when rotated; log lines are JSON with the objects they concern."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from pathlib import Path

from cryptography import x509

from devcluster.pki import generate_self_signed
from node_maintenance.runtime.logs import JsonFormatter
from node_maintenance.webhooks.certs import CERT_FILE, KEY_FILE, ReloadingTLS


def test_generated_certificate_names_the_hosts_and_is_signed_by_the_ca(tmp_path: Path) -> None:
    ca_pem = generate_self_signed(tmp_path, ["127.0.0.1", "localhost"])
    cert = x509.load_pem_x509_certificate((tmp_path / CERT_FILE).read_bytes())
    ca = x509.load_pem_x509_certificate(ca_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    cert.verify_directly_issued_by(ca)
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o077 == 0


def test_reload_only_when_the_files_change(tmp_path: Path) -> None:
    generate_self_signed(tmp_path, ["127.0.0.1"])
    tls = ReloadingTLS(tmp_path)
    assert tls.reload() is False
    first = (tmp_path / CERT_FILE).read_bytes()
    generate_self_signed(tmp_path, ["127.0.0.1"])
    os.utime(tmp_path / CERT_FILE, (1, 1))  # a distinct mtime even within one clock tick
    assert (tmp_path / CERT_FILE).read_bytes() != first
    assert tls.reload() is True and tls.reload() is False


def test_log_lines_are_json_with_our_context() -> None:
    record = logging.LogRecord("node_maintenance", logging.INFO, __file__, 1, "node drained", (), None)
    record.nodeMaintenance, record.node, record.settings = "nm-1", "n1", object()
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert entry["msg"] == "node drained" and entry["nodeMaintenance"] == "nm-1" and entry["node"] == "n1"
    assert "settings" not in entry and entry["level"] == "info" and entry["time"].endswith("Z")

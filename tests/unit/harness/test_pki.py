"""The harness's certificates: a serving certificate for the hosts asked for, issued by the CA handed back,
its key readable by its owner only; and the aggregation layer's client certificate, issued by a CA of its own."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devcluster import pki
from devcluster.pki import generate_self_signed
from node_maintenance.webhooks.certs import CERT_FILE, KEY_FILE


def test_generated_certificate_names_the_hosts_and_is_signed_by_the_ca(tmp_path: Path) -> None:
    ca_pem = generate_self_signed(tmp_path, ["127.0.0.1", "localhost"])
    cert = x509.load_pem_x509_certificate((tmp_path / CERT_FILE).read_bytes())
    ca = x509.load_pem_x509_certificate(ca_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    cert.verify_directly_issued_by(ca)
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o077 == 0


def test_front_proxy_client_certificate_is_issued_by_its_own_ca_for_client_auth(tmp_path: Path) -> None:
    """The API server presents it to extension API servers, which accept it only as a client certificate
    of the front-proxy CA bearing the allowed name."""
    pki.write_front_proxy_pki(tmp_path)
    ca = x509.load_pem_x509_certificate((tmp_path / pki.FRONT_PROXY_CA_FILE).read_bytes())
    cert = x509.load_pem_x509_certificate((tmp_path / pki.FRONT_PROXY_CERT_FILE).read_bytes())
    cert.verify_directly_issued_by(ca)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [pki.FRONT_PROXY_CLIENT]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert (tmp_path / pki.FRONT_PROXY_KEY_FILE).stat().st_mode & 0o077 == 0

"""Serving certificates for the webhooks: read from files (where OLM mounts them), reloaded when rotated.

For local runs and tests, ``generate_self_signed`` writes a CA-signed serving pair in the same layout.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
log = logging.getLogger(__name__)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def generate_self_signed(directory: Path, hosts: list[str], *, days: int = 365) -> bytes:
    """Write ``tls.crt``/``tls.key`` for ``hosts`` signed by a fresh CA; return the CA PEM (the caBundle)."""
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("node-maintenance-operator-ca"))
        .issuer_name(_name("node-maintenance-operator-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    # Write the key first and swap the certificate in last, so a reader never pairs a new cert with an old key.
    tmp_key, tmp_cert = directory / f".{KEY_FILE}.tmp", directory / f".{CERT_FILE}.tmp"
    tmp_key.write_bytes(key_pem)
    tmp_key.chmod(0o600)
    tmp_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tmp_key.replace(directory / KEY_FILE)
    tmp_cert.replace(directory / CERT_FILE)
    return ca.public_bytes(serialization.Encoding.PEM)


class ReloadingTLS:
    """An SSLContext whose certificate chain follows the files on disk.

    New TLS handshakes use whatever pair was loaded last; connections already open are unaffected,
    so rotating certificates drops no request.
    """

    def __init__(self, cert_dir: Path) -> None:
        self.cert_dir = cert_dir
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp: tuple[float, float] | None = None
        self.reload()

    def _current_stamp(self) -> tuple[float, float]:
        return ((self.cert_dir / CERT_FILE).stat().st_mtime, (self.cert_dir / KEY_FILE).stat().st_mtime)

    def reload(self) -> bool:
        """Load the pair if it changed since the last load; return whether it did."""
        stamp = self._current_stamp()
        if stamp == self._stamp:
            return False
        self.context.load_cert_chain(self.cert_dir / CERT_FILE, self.cert_dir / KEY_FILE)
        self._stamp = stamp
        return True

    async def watch(self, interval: float = 5.0) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                if self.reload():
                    log.info("reloaded webhook serving certificate", extra={"certDir": str(self.cert_dir)})
            except (OSError, ssl.SSLError) as error:
                # Mid-rotation the pair can be briefly inconsistent; keep serving the last good one.
                log.warning("webhook certificate not reloaded yet: %s", error)

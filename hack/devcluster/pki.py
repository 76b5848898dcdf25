"""Key material for a throwaway control plane: a CA-signed apiserver certificate and the service-account key,
and CA-signed serving pairs for the operator's webhooks in the layout OLM mounts them in."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from node_maintenance.webhooks.certs import CERT_FILE, KEY_FILE

APISERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def generate_self_signed(directory: Path, hosts: list[str], *, days: int = 365) -> bytes:
    """Write ``tls.crt``/``tls.key`` for ``hosts`` signed by a fresh CA; return the CA PEM (the caBundle)."""
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
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


def write_cluster_pki(directory: Path, *, service_ip: str) -> None:
    """Write ca.crt, tls.crt/tls.key (the apiserver's) and sa.key/sa.pub into ``directory``.

    The serving certificate names 127.0.0.1 and the in-cluster service IP and DNS names, so both
    local clients and anything that resolves ``kubernetes.default.svc`` verify it.
    """
    ca = generate_self_signed(directory, ["127.0.0.1", service_ip, "localhost", *APISERVER_NAMES], days=2)
    (directory / "ca.crt").write_bytes(ca)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "sa.key").write_bytes(
        sa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (directory / "sa.key").chmod(0o600)
    (directory / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )

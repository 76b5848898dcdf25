"""Key material for a throwaway control plane: a CA-signed apiserver certificate, the service-account key and
the aggregation layer's front-proxy CA and client certificate, and CA-signed serving pairs for the operator's
webhooks in the layout OLM mounts them in."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from node_maintenance.webhooks.certs import CERT_FILE, KEY_FILE

APISERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
# The name the API server's aggregator presents to extension API servers (--requestheader-allowed-names).
FRONT_PROXY_CLIENT = "front-proxy-client"
FRONT_PROXY_CA_FILE = "front-proxy-ca.crt"
FRONT_PROXY_CERT_FILE = "front-proxy-client.crt"
FRONT_PROXY_KEY_FILE = "front-proxy-client.key"


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _validity(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    """From a few minutes ago (clocks of the processes reading it may lag) for ``days``."""
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    return now, now + datetime.timedelta(days=days)


def _ca(common_name: str, days: int) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A fresh self-signed CA that signs leaves only."""
    not_before, not_after = _validity(days)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], common_name: str, days: int, usage: x509.ObjectIdentifier,
    hosts: Sequence[str] = (),
) -> tuple[bytes, bytes]:
    """A key and a certificate for ``common_name`` (and ``hosts``) issued by ``ca`` for ``usage``, both PEM."""
    ca_key, ca_cert = ca
    not_before, not_after = _validity(days)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return key_pem, builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def generate_self_signed(directory: Path, hosts: list[str], *, days: int = 365) -> bytes:
    """Write ``tls.crt``/``tls.key`` for ``hosts`` signed by a fresh CA; return the CA PEM (the caBundle)."""
    ca = _ca("node-maintenance-operator-ca", days)
    key_pem, cert_pem = _leaf(ca, hosts[0], days, ExtendedKeyUsageOID.SERVER_AUTH, hosts)
    directory.mkdir(parents=True, exist_ok=True)
    # Write the key first and swap the certificate in last, so a reader never pairs a new cert with an old key.
    tmp_key, tmp_cert = directory / f".{KEY_FILE}.tmp", directory / f".{CERT_FILE}.tmp"
    tmp_key.write_bytes(key_pem)
    tmp_key.chmod(0o600)
    tmp_cert.write_bytes(cert_pem)
    tmp_key.replace(directory / KEY_FILE)
    tmp_cert.replace(directory / CERT_FILE)
    return _pem(ca[1])


def write_cluster_pki(directory: Path, *, service_ip: str) -> None:
    """Write ca.crt, tls.crt/tls.key (the apiserver's), sa.key/sa.pub and the front proxy's files into ``directory``.

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
    write_front_proxy_pki(directory)


def write_front_proxy_pki(directory: Path, *, days: int = 2) -> None:
    """Write the aggregation layer's key material into ``directory``: a CA of its own (``FRONT_PROXY_CA_FILE``,
    which extension API servers such as OLM's package server read from the cluster to trust the caller's
    identity headers) and the client certificate the API server's aggregator presents to them."""
    ca = _ca("front-proxy-ca", days)
    key_pem, cert_pem = _leaf(ca, FRONT_PROXY_CLIENT, days, ExtendedKeyUsageOID.CLIENT_AUTH)
    (directory / FRONT_PROXY_CA_FILE).write_bytes(_pem(ca[1]))
    (directory / FRONT_PROXY_CERT_FILE).write_bytes(cert_pem)
    (directory / FRONT_PROXY_KEY_FILE).write_bytes(key_pem)
    (directory / FRONT_PROXY_KEY_FILE).chmod(0o600)

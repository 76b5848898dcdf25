"""Key material for a throwaway control plane: a CA-signed apiserver certificate and the service-account key."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from node_maintenance.certs import generate_self_signed

APISERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")


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

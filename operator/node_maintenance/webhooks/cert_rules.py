"""The webhook serving certificate the operator issues itself (``--manage-certs``): what is due when, and issuing it.

Pure: no I/O and no clock (``now`` is given), so that every rule is tested at any moment; :mod:`.own_certs` reads and
writes the Secret, the files and the caBundles. The Secret has the layout of open-policy-agent/cert-controller's
rotator, so that whoever knows that one reads this one: ``ca.crt`` (the CA certificates the webhooks' caBundle trusts,
PEM, the current CA first, then the one it replaced while serving certificates that one signed may still be served),
``ca.key`` (the current CA's key), ``tls.crt`` and ``tls.key`` (the serving pair), of type ``kubernetes.io/tls``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
SECRET_TYPE = "kubernetes.io/tls"
CA_NAME = "node-maintenance-operator-ca"
# Long enough that its rotation, the one change every replica and the caBundles must follow, is rare; short enough
# that a leaked CA key is not good for a decade.
CA_LIFETIME = datetime.timedelta(days=3 * 365)
# As cert-manager's default: a key that leaked serves an impostor for weeks at most.
SERVING_LIFETIME = datetime.timedelta(days=90)
# Renewed once two thirds of a certificate's life have passed: the last third leaves weeks (a year, for the CA) to
# retry through any outage, and for the previous CA to stay trusted while replicas pick the new pair up.
RENEW_AT = 2 / 3
# Certificates are valid from a little before they are issued: an API server whose clock lags ours trusts them at once.
BACKDATE = datetime.timedelta(minutes=5)

SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class Bundle:
    """The Secret's four values, PEM. ``ca_certs`` is the caBundle: the current CA first, then maybe the previous one."""

    ca_certs: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def secret_data(self) -> dict[str, str]:
        """The Secret's ``data``: base64, as the API takes it."""
        values = {CA_CERT: self.ca_certs, CA_KEY: self.ca_key, TLS_CERT: self.cert, TLS_KEY: self.key}
        return {name: base64.b64encode(value).decode() for name, value in values.items()}


class Due(enum.Enum):
    """What a bundle needs at a given moment."""

    NOTHING = "nothing"
    SERVING = "a new serving certificate"  # from the current CA, which the caBundles already trust
    CA = "a new CA and a serving certificate from it"


def read(data: Mapping[str, Any] | None) -> Bundle | None:
    """The bundle in a Secret's ``data`` (base64 strings, as the API returns them); None if a value is missing or is not
    what its key holds (PEM certificates, a PEM key of a kind that can sign), so that the caller issues a new one."""
    if not data:
        return None
    try:
        values = [base64.b64decode(str(data[name]), validate=True) for name in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)]
        bundle = Bundle(*values)
        x509.load_pem_x509_certificates(bundle.ca_certs)
        x509.load_pem_x509_certificate(bundle.cert)
        _signing_key(bundle.ca_key)
        _signing_key(bundle.key)
    except (KeyError, ValueError, TypeError):  # base64's binascii.Error is a ValueError
        return None
    return bundle


def due(bundle: Bundle | None, names: Sequence[str], now: datetime.datetime) -> Due:
    """What ``bundle`` needs at ``now`` to serve ``names``: a new CA when there is none usable (missing, its key not its
    own) or it is two thirds through its life; else a new serving certificate when it is two thirds through its life, does
    not cover every name, was not signed by the current CA, or its key is not its own."""
    if bundle is None:
        return Due.CA
    ca = _current_ca(bundle)
    if _signing_key(bundle.ca_key).public_key() != ca.public_key() or now >= renewal(ca):
        return Due.CA
    cert = x509.load_pem_x509_certificate(bundle.cert)
    if _signing_key(bundle.key).public_key() != cert.public_key() or now >= renewal(cert):
        return Due.SERVING
    try:
        cert.verify_directly_issued_by(ca)
        covered = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return Due.SERVING
    return Due.NOTHING if set(names) <= set(covered) else Due.SERVING


def renewed(bundle: Bundle | None, names: Sequence[str], now: datetime.datetime) -> tuple[Due, Bundle]:
    """What was due at ``now`` (see :func:`due`), and ``bundle`` with it issued: ``bundle`` itself when nothing was."""
    needed = due(bundle, names, now)
    if needed is Due.CA or bundle is None:
        return Due.CA, new_ca(bundle, names, now)
    if needed is Due.SERVING:
        return needed, new_serving(bundle, names, now)
    return needed, bundle


def next_renewal(bundle: Bundle) -> datetime.datetime:
    """When the CA or the serving certificate of ``bundle`` is next due, whichever comes first."""
    return min(renewal(_current_ca(bundle)), renewal(x509.load_pem_x509_certificate(bundle.cert)))


def renewal(cert: x509.Certificate) -> datetime.datetime:
    """When ``cert`` is due for renewal: two thirds through its validity."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * RENEW_AT


def new_ca(previous: Bundle | None, names: Sequence[str], now: datetime.datetime) -> Bundle:
    """A new self-signed CA and a serving certificate from it. The caBundle keeps the CA it replaces (if it has not
    expired): replicas that have not read the new pair yet serve a certificate that CA signed. Older ones go."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    cert = (
        _builder(name, name, key.public_key(), now, now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
                       critical=True)
        .sign(key, hashes.SHA256())
    )
    ca_certs = cert.public_bytes(serialization.Encoding.PEM)
    if previous is not None and (replaced := _current_ca(previous)).not_valid_after_utc > now:
        ca_certs += replaced.public_bytes(serialization.Encoding.PEM)
    ca_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return new_serving(Bundle(ca_certs, ca_key, b"", b""), names, now)


def new_serving(bundle: Bundle, names: Sequence[str], now: datetime.datetime) -> Bundle:
    """``bundle`` with a new serving pair for ``names`` from its current CA, valid no longer than the CA is."""
    ca, ca_key = _current_ca(bundle), _signing_key(bundle.ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    cert = (
        _builder(subject, ca.subject, key.public_key(), now, min(now + SERVING_LIFETIME, ca.not_valid_after_utc))
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False),
                       critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name) for name in names]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return Bundle(bundle.ca_certs, bundle.ca_key, cert.public_bytes(serialization.Encoding.PEM), pem_key)


def trusted(ca_certs: bytes, live: str | None, now: datetime.datetime) -> str:
    """The caBundle to write (base64, as the API holds it): the Secret's CA certificates, then every certificate of the
    ``live`` caBundle that is not among them and has not expired. A CA the Secret no longer holds (the Secret deleted or
    garbled and issued anew, or rotated by a replica that read it before another did) stays trusted until it expires:
    a replica that has not read the new pair yet still serves a certificate it signed, and no write of ours takes
    away the trust another replica's pair needs."""
    ours = x509.load_pem_x509_certificates(ca_certs)
    kept = []
    if live:
        with contextlib.suppress(ValueError):
            kept = [cert for cert in x509.load_pem_x509_certificates(base64.b64decode(live, validate=True))
                    if cert not in ours and cert.not_valid_after_utc > now]
    return base64.b64encode(ca_certs + b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in kept)).decode()


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: datetime.datetime,
             not_after: datetime.datetime) -> x509.CertificateBuilder:
    """A certificate's common part. Its serial number comes from its new key, unique as the key is, so that issuing asks
    for no randomness of its own."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    serial = int.from_bytes(hashlib.sha256(der).digest()[:16], "big") | 1  # positive and at most 20 octets, as RFC 5280 asks
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(serial)
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _current_ca(bundle: Bundle) -> x509.Certificate:
    return x509.load_pem_x509_certificates(bundle.ca_certs)[0]


def _signing_key(pem: bytes) -> SigningKey:
    """The PEM key, of a kind a certificate is signed with here (a CA key another tool made may be RSA)."""
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, SigningKey):
        raise ValueError(f"a {type(key).__name__} cannot sign here")
    return key

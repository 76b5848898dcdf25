"""The certificate the operator issues itself: what is due when, what is issued, and that what is issued verifies for the
Service's names against the caBundle, a replaced CA's certificates too while that CA is carried."""

from __future__ import annotations

import base64
import datetime

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from node_maintenance.webhooks import cert_rules
from node_maintenance.webhooks.cert_rules import Bundle, Due
from tests.unit.builders import NOW

NAMES = ("webhooks.nmo.svc", "webhooks.nmo.svc.cluster.local")
DAY = datetime.timedelta(days=1)
CA_DUE = NOW + cert_rules.CA_LIFETIME * cert_rules.RENEW_AT  # a little past it: issued backdated
SERVING_DUE = NOW + cert_rules.SERVING_LIFETIME * cert_rules.RENEW_AT


def cas(bundle: Bundle) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle.ca_certs)


def serving(bundle: Bundle) -> x509.Certificate:
    return x509.load_pem_x509_certificate(bundle.cert)


def verify(bundle: Bundle, name: str, at: datetime.datetime) -> None:
    """Verify the serving certificate for ``name`` against the caBundle, as a TLS client of the Service would."""
    verifier = PolicyBuilder().store(Store(cas(bundle))).time(at).build_server_verifier(x509.DNSName(name))
    verifier.verify(serving(bundle), [])


@pytest.fixture(scope="module")
def fresh() -> Bundle:
    return cert_rules.new_ca(None, NAMES, NOW)


def test_a_fresh_bundle_has_one_ca_and_a_serving_certificate_that_verifies_for_every_name(fresh: Bundle) -> None:
    (ca,) = cas(fresh)
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == cert_rules.CA_NAME
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    cert = serving(fresh)
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName) == list(NAMES)
    assert cert.not_valid_after_utc == NOW + cert_rules.SERVING_LIFETIME
    for name in NAMES:
        verify(fresh, name, NOW)
    with pytest.raises(VerificationError):
        verify(fresh, "elsewhere.nmo.svc", NOW)


def test_nothing_is_due_until_two_thirds_of_the_serving_certificate_s_life(fresh: Bundle) -> None:
    assert cert_rules.due(fresh, NAMES, NOW) is Due.NOTHING
    assert cert_rules.next_renewal(fresh) < SERVING_DUE
    assert cert_rules.due(fresh, NAMES, cert_rules.next_renewal(fresh) - datetime.timedelta(seconds=1)) is Due.NOTHING
    assert cert_rules.due(fresh, NAMES, cert_rules.next_renewal(fresh)) is Due.SERVING
    assert cert_rules.renewed(fresh, NAMES, NOW) == (Due.NOTHING, fresh)


def test_a_serving_certificate_renewed_keeps_the_ca(fresh: Bundle) -> None:
    needed, renewed = cert_rules.renewed(fresh, NAMES, SERVING_DUE)
    assert needed is Due.SERVING
    assert (renewed.ca_certs, renewed.ca_key) == (fresh.ca_certs, fresh.ca_key)
    assert renewed.cert != fresh.cert and renewed.key != fresh.key
    assert cert_rules.due(renewed, NAMES, SERVING_DUE) is Due.NOTHING
    verify(renewed, NAMES[0], SERVING_DUE)


def test_a_ca_near_its_end_is_replaced_and_the_bundle_carries_the_new_then_the_old(fresh: Bundle) -> None:
    assert cert_rules.due(fresh, NAMES, CA_DUE) is Due.CA
    needed, rotated = cert_rules.renewed(fresh, NAMES, CA_DUE)
    assert needed is Due.CA and rotated.ca_key != fresh.ca_key
    new, old = cas(rotated)
    assert old == cas(fresh)[0] and new != old
    verify(rotated, NAMES[0], CA_DUE)
    verify(Bundle(rotated.ca_certs, rotated.ca_key, fresh.cert, fresh.key), NAMES[0], NOW)  # a replica not yet renewed
    # The next rotation drops the oldest: the bundle holds two CAs at most.
    again = cert_rules.new_ca(rotated, NAMES, CA_DUE + DAY)
    assert cas(again)[1:] == [new]


def test_an_expired_ca_is_not_carried(fresh: Bundle) -> None:
    later = NOW + cert_rules.CA_LIFETIME + DAY
    assert len(cas(cert_rules.new_ca(fresh, NAMES, later))) == 1


def test_a_serving_certificate_is_never_valid_past_its_ca(fresh: Bundle) -> None:
    near_end = NOW + cert_rules.CA_LIFETIME - 10 * DAY
    assert serving(cert_rules.new_serving(fresh, NAMES, near_end)).not_valid_after_utc == cas(fresh)[0].not_valid_after_utc


def test_a_serving_certificate_not_for_every_name_from_another_ca_or_with_another_key_is_renewed(fresh: Bundle) -> None:
    assert cert_rules.due(fresh, (*NAMES, "more.nmo.svc"), NOW) is Due.SERVING
    other = cert_rules.new_ca(None, NAMES, NOW)
    assert cert_rules.due(Bundle(fresh.ca_certs, fresh.ca_key, other.cert, other.key), NAMES, NOW) is Due.SERVING
    assert cert_rules.due(Bundle(fresh.ca_certs, fresh.ca_key, fresh.cert, other.key), NAMES, NOW) is Due.SERVING


def test_a_ca_key_that_is_not_the_ca_s_own_replaces_the_ca(fresh: Bundle) -> None:
    other = cert_rules.new_ca(None, NAMES, NOW)
    assert cert_rules.due(Bundle(fresh.ca_certs, other.ca_key, fresh.cert, fresh.key), NAMES, NOW) is Due.CA


def test_secret_data_reads_back(fresh: Bundle) -> None:
    assert cert_rules.read(fresh.secret_data()) == fresh


@pytest.mark.parametrize("broken", [
    {cert_rules.TLS_KEY: None},
    {cert_rules.CA_CERT: "not base64!"},
    {cert_rules.CA_CERT: base64.b64encode(b"no certificate").decode()},
    {cert_rules.TLS_KEY: base64.b64encode(b"no key").decode()},
], ids=["missing", "not-base64", "no-pem", "no-key"])
def test_missing_or_malformed_data_reads_as_no_bundle(fresh: Bundle, broken: dict[str, str | None]) -> None:
    data = {name: value for name, value in {**fresh.secret_data(), **broken}.items() if value is not None}
    assert cert_rules.read(data) is None


def test_no_data_reads_as_no_bundle_and_a_ca_is_due() -> None:
    assert cert_rules.read(None) is None and cert_rules.read({}) is None
    assert cert_rules.due(None, NAMES, NOW) is Due.CA

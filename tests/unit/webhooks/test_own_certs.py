"""With --manage-certs the operator keeps its webhook serving pair itself: it issues it into a Secret the replicas share,
renews it when due (the CA too, carrying the old one in the caBundle), injects the caBundle into the webhooks that call
its Service and only those, serves the pair from its certificate directory, and takes another replica's pair when that
one wrote first."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from node_maintenance.api import timestamps
from node_maintenance.api.paths import NODE_MAINTENANCE_CRD, POLICY_CRD, secret_path, validating_webhook_configuration_path
from node_maintenance.client.errors import Conflict, NotFound, Unreachable
from node_maintenance.runtime.main import parse_args
from node_maintenance.webhooks import cert_rules, own_certs
from node_maintenance.webhooks.certs import CERT_FILE, KEY_FILE
from node_maintenance.webhooks.own_certs import OwnCertificates
from simulation.selectors import merged
from tests.unit.builders import NOW, FakeApi, Obj

NAMESPACE = "nmo"
SERVICE = "nmo-webhooks"
SECRET = "nmo-webhook-cert"
CONFIGURATION = "nmo"
SECRET_PATH = secret_path(NAMESPACE, SECRET)
VWC_PATH = validating_webhook_configuration_path(CONFIGURATION)
OURS = {"service": {"namespace": NAMESPACE, "name": SERVICE, "path": "/validate"}}
THEIRS = {"service": {"namespace": NAMESPACE, "name": "someone-else", "path": "/validate"}}


@dataclass
class Clock:
    """The wall clock a test moves."""

    now: datetime.datetime = NOW

    def __call__(self) -> datetime.datetime:
        return self.now



def cluster() -> FakeApi:
    """An API server that stores what is written to the Secret, the webhook configuration and the CRDs, with
    resourceVersions and their preconditions: our VWC with two webhooks calling our Service and one calling another; the
    NodeMaintenance CRD converting through our Service, the policy CRD through another."""
    api = FakeApi({
        VWC_PATH: {"metadata": {"name": CONFIGURATION, "resourceVersion": "1"},
                   "webhooks": [{"name": "a", "clientConfig": OURS}, {"name": "b", "clientConfig": OURS}, {"name": "c", "clientConfig": THEIRS}]},
        NODE_MAINTENANCE_CRD: {"metadata": {"resourceVersion": "1"}, "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": OURS}}}},
        POLICY_CRD: {"metadata": {"resourceVersion": "1"}, "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": THEIRS}}}},
    })

    def stored(path: str, obj: Obj) -> Obj:
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(len(api.calls) + 1)}}
        api.objects[path] = obj
        return obj

    def create(body: Obj) -> Obj:
        if SECRET_PATH in api.objects:
            raise Conflict(409, "AlreadyExists", f"secrets {SECRET!r} already exists")
        return stored(SECRET_PATH, body)

    def writing(path: str, patch: bool) -> Callable[[Obj], Obj]:
        def write(body: Obj) -> Obj:
            if path not in api.objects:
                raise NotFound(404, "NotFound", "gone")
            current = api.objects[path]
            if body.get("metadata", {}).get("resourceVersion") not in (None, current["metadata"]["resourceVersion"]):
                raise Conflict(409, "Conflict", "the object has been modified")
            return stored(path, merged(current, body) if patch else body)
        return write

    api.answer_by("POST", secret_path(NAMESPACE), create)
    api.answer_by("PUT", SECRET_PATH, writing(SECRET_PATH, patch=False))
    for path in (VWC_PATH, NODE_MAINTENANCE_CRD, POLICY_CRD):
        api.answer_by("PATCH", path, writing(path, patch=True))
    return api


def replica(api: FakeApi, cert_dir: Path, clock: Callable[[], datetime.datetime] = timestamps.now) -> OwnCertificates:
    cert_dir.mkdir(exist_ok=True)
    return OwnCertificates(api.blocking(), NAMESPACE, SECRET, SERVICE, (CONFIGURATION,), cert_dir, clock)


def secret_bundle(api: FakeApi) -> cert_rules.Bundle:
    bundle = cert_rules.read(api.objects[SECRET_PATH]["data"])
    assert bundle is not None
    return bundle


def ca_bundles(api: FakeApi) -> dict[str, str | None]:
    """The caBundle of each webhook of the VWC, and of each CRD's conversion."""
    found = {webhook["name"]: webhook["clientConfig"].get("caBundle") for webhook in api.objects[VWC_PATH]["webhooks"]}
    for crd in (NODE_MAINTENANCE_CRD, POLICY_CRD):
        found[crd] = api.objects[crd]["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle")
    return found


def served(cert_dir: Path) -> tuple[bytes, bytes]:
    return (cert_dir / CERT_FILE).read_bytes(), (cert_dir / KEY_FILE).read_bytes()


def test_a_first_start_creates_the_secret_serves_the_pair_and_injects_the_ca_where_our_service_is_called(tmp_path: Path) -> None:
    api = cluster()
    clock = Clock()
    next_look = replica(api, tmp_path, clock).ensure()
    secret = api.objects[SECRET_PATH]
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    bundle = secret_bundle(api)
    assert served(tmp_path) == (bundle.cert, bundle.key)
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600
    ca = base64.b64encode(bundle.ca_certs).decode()
    assert ca_bundles(api) == {"a": ca, "b": ca, "c": None, NODE_MAINTENANCE_CRD: ca, POLICY_CRD: None}
    assert api.calls_to("PATCH", POLICY_CRD) == []
    assert next_look == NOW + own_certs.RECHECK  # renewal is weeks away: looked at again sooner
    assert cert_rules.due(bundle, own_certs.service_names(SERVICE, NAMESPACE), NOW) is cert_rules.Due.NOTHING


def test_a_second_replica_takes_the_stored_pair_and_writes_nothing(tmp_path: Path) -> None:
    api = cluster()
    replica(api, tmp_path / "first").ensure()
    api.calls.clear()
    replica(api, tmp_path / "second").ensure()
    assert api.writes() == []
    assert served(tmp_path / "second") == served(tmp_path / "first")


def test_an_unchanged_pair_is_not_written_again(tmp_path: Path) -> None:
    certificates = replica(cluster(), tmp_path)
    certificates.ensure()
    files = [(tmp_path / name).stat().st_ino for name in (CERT_FILE, KEY_FILE)]
    certificates.ensure()
    assert [(tmp_path / name).stat().st_ino for name in (CERT_FILE, KEY_FILE)] == files


def test_a_serving_certificate_past_two_thirds_of_its_life_is_renewed_from_the_same_ca(tmp_path: Path) -> None:
    api, clock = cluster(), Clock()
    certificates = replica(api, tmp_path, clock)
    certificates.ensure()
    before, injected = secret_bundle(api), ca_bundles(api)
    clock.now = cert_rules.next_renewal(before)
    api.calls.clear()
    certificates.ensure()
    after = secret_bundle(api)
    assert (after.ca_certs, after.ca_key) == (before.ca_certs, before.ca_key) and after.cert != before.cert
    assert api.writes() == [("PUT", SECRET_PATH)]  # the caBundles already trust the CA
    assert ca_bundles(api) == injected
    assert served(tmp_path) == (after.cert, after.key)


def test_a_ca_near_its_end_is_replaced_and_the_bundle_carries_the_new_and_the_old(tmp_path: Path) -> None:
    api, clock = cluster(), Clock()
    certificates = replica(api, tmp_path, clock)
    certificates.ensure()
    before = secret_bundle(api)
    clock.now = NOW + cert_rules.CA_LIFETIME * cert_rules.RENEW_AT
    certificates.ensure()
    after = secret_bundle(api)
    assert after.ca_key != before.ca_key
    assert after.ca_certs.endswith(before.ca_certs) and after.ca_certs != before.ca_certs
    ca = base64.b64encode(after.ca_certs).decode()
    assert ca_bundles(api) == {"a": ca, "b": ca, "c": None, NODE_MAINTENANCE_CRD: ca, POLICY_CRD: None}
    assert served(tmp_path) == (after.cert, after.key)


def test_a_malformed_secret_is_replaced_keeping_its_type(tmp_path: Path) -> None:
    api = cluster()
    api.objects[SECRET_PATH] = {"metadata": {"name": SECRET, "namespace": NAMESPACE, "resourceVersion": "7"}, "type": "Opaque",
                                "data": {"tls.crt": "Z2FyYmFnZQ=="}}
    replica(api, tmp_path).ensure()
    (put,) = api.calls_to("PUT", SECRET_PATH)
    assert put.body["metadata"]["resourceVersion"] == "7" and put.body["type"] == "Opaque"
    assert served(tmp_path) == (secret_bundle(api).cert, secret_bundle(api).key)


def test_a_conflict_on_create_takes_the_pair_the_other_replica_made(tmp_path: Path) -> None:
    api = cluster()
    other = replica(api, tmp_path / "other")
    other.ensure()
    theirs = api.objects.pop(SECRET_PATH)
    api.calls.clear()
    # Our read finds no Secret; by our create the other replica has made its own.
    api.script("GET", SECRET_PATH, NotFound(404, "NotFound", "secrets not found"), theirs)
    api.script("POST", secret_path(NAMESPACE), Conflict(409, "AlreadyExists", "secrets already exists"))
    replica(api, tmp_path / "ours").ensure()
    assert api.writes() == [("POST", secret_path(NAMESPACE))]
    assert served(tmp_path / "ours") == served(tmp_path / "other")


def test_conflicts_every_time_give_up_with_the_last_one(tmp_path: Path) -> None:
    api = cluster()
    api.fail("POST", secret_path(NAMESPACE), Conflict(409, "AlreadyExists", "secrets already exists"), times=own_certs.ROUNDS)
    with pytest.raises(Conflict):
        replica(api, tmp_path).ensure()
    assert not (tmp_path / CERT_FILE).exists()


def test_missing_configuration_and_crds_are_skipped(tmp_path: Path) -> None:
    api = cluster()
    for path in (VWC_PATH, NODE_MAINTENANCE_CRD, POLICY_CRD):
        del api.objects[path]
    replica(api, tmp_path).ensure()
    assert [method for method, _ in api.writes()] == ["POST"]


def test_a_configuration_not_there_yet_is_looked_for_again_soon_and_injected_once_it_comes(tmp_path: Path) -> None:
    """The chart creates the webhook configuration after the Deployment: until its webhooks carry the CA, the API server
    cannot call them, so its absence is looked at again within seconds, not at the next five-minute look."""
    api = cluster()
    configuration = api.objects.pop(VWC_PATH)
    clock = Clock()
    certificates = replica(api, tmp_path, clock)
    assert certificates.ensure() == NOW + own_certs.MISSING_RECHECK
    api.objects[VWC_PATH] = configuration
    assert certificates.ensure() == NOW + own_certs.RECHECK
    ca = base64.b64encode(secret_bundle(api).ca_certs).decode()
    assert ca_bundles(api)["a"] == ca_bundles(api)["b"] == ca


def test_a_webhook_configuration_changed_meanwhile_is_read_again(tmp_path: Path) -> None:
    api = cluster()
    api.fail("PATCH", VWC_PATH, Conflict(409, "Conflict", "the object has been modified"))
    replica(api, tmp_path).ensure()
    assert len(api.calls_to("PATCH", VWC_PATH)) == 2
    assert ca_bundles(api)["a"] == base64.b64encode(secret_bundle(api).ca_certs).decode()


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> None:
    """A TLS handshake between the two contexts, each reading what the other writes, in memory."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    pending = [server.wrap_bio(to_server, to_client, server_side=True), client.wrap_bio(to_client, to_server, server_hostname=hostname)]
    for _ in range(10):
        for end in list(pending):
            try:
                end.do_handshake()
                pending.remove(end)
            except ssl.SSLWantReadError:
                pass
        if not pending:
            return
    raise AssertionError("the handshake did not end")


def test_the_served_pair_loads_and_a_client_trusting_the_ca_bundle_accepts_it_for_the_service(tmp_path: Path) -> None:
    api = cluster()
    replica(api, tmp_path).ensure()  # the real clock: ssl checks validity against it
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / CERT_FILE, tmp_path / KEY_FILE)
    client = ssl.create_default_context(cadata=secret_bundle(api).ca_certs.decode())
    for name in own_certs.service_names(SERVICE, NAMESPACE):
        handshake(server, client, name)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client, f"other.{NAMESPACE}.svc")


def test_first_retries_until_it_succeeds_and_keep_renews_when_due(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(own_certs, "RETRY_SECONDS", 0.01)
    api, clock = cluster(), Clock()
    api.fail("GET", SECRET_PATH, Unreachable("connection refused"))
    certificates = replica(api, tmp_path, clock)

    async def scene() -> None:
        assert await certificates.first(asyncio.Event())
        first = served(tmp_path)
        clock.now = cert_rules.next_renewal(secret_bundle(api))  # past the re-check ensure asked for too
        keeping = asyncio.create_task(certificates.keep())
        async with asyncio.timeout(10):
            while served(tmp_path) == first:  # noqa: ASYNC110 - a file written signals nobody
                await asyncio.sleep(0.01)
        keeping.cancel()

    asyncio.run(scene())
    assert "managing the webhook certificate failed" in caplog.text and "connection refused" in caplog.text


def test_an_error_nobody_foresaw_is_logged_and_tried_again_not_the_end_of_the_keeper(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(own_certs, "RETRY_SECONDS", 0.01)
    api = cluster()
    api.fail("GET", SECRET_PATH, ValueError("a shape nobody foresaw"))
    assert asyncio.run(replica(api, tmp_path).first(asyncio.Event()))
    assert "a shape nobody foresaw" in caplog.text and (tmp_path / CERT_FILE).exists()


def test_a_ca_the_secret_no_longer_holds_stays_trusted_until_it_expires(tmp_path: Path) -> None:
    """The Secret deleted (or garbled) and issued anew, or rotated by a replica that read it before another: every
    caBundle keeps what it trusted that has not expired, so that a replica still serving the old pair is still trusted."""
    api = cluster()
    clock = Clock()
    replica(api, tmp_path / "a", clock).ensure()
    old = secret_bundle(api).ca_certs
    del api.objects[SECRET_PATH]
    replica(api, tmp_path / "b", clock).ensure()
    new = secret_bundle(api).ca_certs
    assert new != old
    both = base64.b64encode(new + old).decode()
    assert ca_bundles(api) == {"a": both, "b": both, "c": None, NODE_MAINTENANCE_CRD: both, POLICY_CRD: None}
    clock.now = NOW + cert_rules.CA_LIFETIME + datetime.timedelta(days=1)  # the old CA expired (so did the new: both renewed)
    replica(api, tmp_path / "b", clock).ensure()
    latest = secret_bundle(api).ca_certs
    assert ca_bundles(api)["a"] == base64.b64encode(latest).decode()  # what expired is trusted no more


def test_first_gives_up_when_asked_to_stop(tmp_path: Path) -> None:
    api = cluster()
    api.outage = Unreachable("no API server")
    stopping = asyncio.Event()
    stopping.set()
    assert asyncio.run(replica(api, tmp_path).first(stopping)) is False


def test_started_by_the_flags_the_pair_is_on_disk_in_a_directory_made_for_it_and_kept(tmp_path: Path) -> None:
    api = cluster()
    cert_dir = tmp_path / "serving-certs"
    args = parse_args(["--manage-certs", "--namespace", NAMESPACE, "--cert-secret", SECRET, "--webhook-service", SERVICE,
                       "--webhook-configuration", CONFIGURATION, "--webhook-cert-dir", str(cert_dir)])

    async def scene() -> None:
        keeping = await own_certs.started(api.blocking(), args, asyncio.Event())
        assert keeping is not None and not keeping.done()
        keeping.cancel()

    asyncio.run(scene())
    assert served(cert_dir) == (secret_bundle(api).cert, secret_bundle(api).key)
    assert ca_bundles(api)["a"] == base64.b64encode(secret_bundle(api).ca_certs).decode()


def test_the_flags_of_the_mode() -> None:
    args = parse_args([])
    assert (args.manage_certs, args.cert_secret, args.webhook_service, args.webhook_configuration) == (
        False, "node-maintenance-operator-webhook-cert", "node-maintenance-operator-service", ["node-maintenance-operator"])
    args = parse_args(["--manage-certs", "--cert-secret", "s", "--webhook-service", "svc",
                       "--webhook-configuration", "one", "--webhook-configuration", "two"])
    assert (args.manage_certs, args.cert_secret, args.webhook_service, args.webhook_configuration) == (True, "s", "svc", ["one", "two"])

"""The operator's webhooks, as an outsider reaches them: random and malformed reviews, reviews of real
objects decided against the real API (every admission rule refuses at least once), huge bodies, wrong
content types, slow clients, plain HTTP and old TLS. Never a 5xx or a dead server: a 4xx, or a review
whose message names the field and the fix."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import ssl
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from devcluster.pki import generate_self_signed
from node_maintenance.api import GROUP, KIND, PLURAL, VERSIONS

from ..helpers import NM, apply, create_nm, delete_nm, eventually, existing, get

pytestmark = pytest.mark.e2e
CONVERT, VALIDATE = "/convert", "/validate-nodemaintenance"
# Kubernetes' and OpenShift's names (not ours): a control-plane node's label, the etcd quorum guard budget.
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
ETCD_GUARD_PDB = "etcd-guard-pdb"  # in the session's etcd_guard_namespace, openshift-etcd
FUZZ = settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))


class Webhook:
    """HTTPS requests to the operator's webhook port, trusting its serving CA."""

    def __init__(self, operator: OperatorProcess) -> None:
        assert operator.ca_pem is not None, "the operator serves a certificate of its own making"
        self.port = operator.webhook_port
        self.context = ssl.create_default_context(cadata=operator.ca_pem.decode())

    def connection(self, timeout: float = 10) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=timeout)

    def post(self, path: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST") -> tuple[int, bytes]:
        connection = self.connection()
        try:
            connection.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def review(self, path: str, review: Any) -> dict[str, Any]:
        status, body = self.post(path, json.dumps(review).encode())
        assert status == 200, (status, body[:300])
        answer = json.loads(body)
        assert isinstance(answer.get("response"), dict), answer
        return cast(dict[str, Any], answer["response"])


@pytest.fixture(scope="module")
def webhook(operator: OperatorProcess) -> Webhook:
    return Webhook(operator)


def _assert_served(operator: OperatorProcess, webhook: Webhook) -> None:
    """The process lives and answers a good review."""
    assert operator.process is not None and operator.process.alive(), operator.logs()[-2000:]
    good = {"request": {"uid": "ok", "desiredAPIVersion": f"{GROUP}/v1beta1", "objects": []}}
    assert webhook.review(CONVERT, good)["result"] == {"status": "Success"}


# ------------------------------------------------------------------ admission against the real API
RULES = {  # each admission rule, by the words its refusal must carry (naming the field and the fix)
    "missing node": ("does not exist", "spec.nodeName", "kubectl get nodes"),
    "node held by another": ("already in maintenance by NodeMaintenance", "delete"),
    "etcd quorum guard": ("control-plane node", "etcd quorum guard", "allows no disruption", "wait until"),
}


@pytest.fixture(scope="module")
def landscape(cluster: Cluster, crd: str, etcd_guard_namespace: str) -> Iterator[dict[str, str]]:
    """A plain node, a node held by a NodeMaintenance, a control-plane node whose etcd guard allows nothing."""
    suffix = uuid.uuid4().hex[:6]
    names = {"plain": f"adm-plain-{suffix}", "held": f"adm-held-{suffix}", "control": f"adm-cp-{suffix}"}
    cluster.create_kwok_node(names["plain"])
    cluster.create_kwok_node(names["held"])
    cluster.create_kwok_node(names["control"], labels={CONTROL_PLANE_LABEL: ""})
    holder = f"holder-{suffix}"
    create_nm(cluster, holder, names["held"])
    apply(cluster, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": ETCD_GUARD_PDB, "namespace": etcd_guard_namespace},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "etcd-guard"}}}})
    eventually(lambda: "disruptionsAllowed" in ((get(cluster, "pdb", ETCD_GUARD_PDB, "-n", etcd_guard_namespace) or {}).get("status") or {}),
               "the etcd guard counted by the disruption controller")
    yield {**names, "holder": holder}
    cluster.kubectl("delete", NM, holder, "--wait=false")
    cluster.kubectl("delete", "pdb", ETCD_GUARD_PDB, "-n", etcd_guard_namespace)  # not the namespace: other modules use it after
    cluster.kubectl("delete", "node", *names.values(), "--wait=false")


def _nm(version: str, name: str, node: str | None, extra_spec: dict[str, Any]) -> dict[str, Any]:
    spec = {**extra_spec, **({"nodeName": node} if node else {})}
    return {"apiVersion": f"{GROUP}/{version}", "kind": KIND, "metadata": {"name": name}, "spec": spec}


dns_label = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")
texts = st.text(max_size=200)  # any unicode, control characters included
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=15,
)
extra_specs = st.fixed_dictionaries({}, optional={"reason": texts, "drain": json_values, "unknown": json_values})


# Who the API server names in the reviews it sends for the cluster's admin: the webhook asks whether they may drain.
ADMIN = {"username": "admin", "uid": "admin", "groups": ["system:masters", "system:authenticated"]}


def _expected(case: dict[str, Any], landscape: dict[str, str]) -> str | None:
    """Which rule must refuse this review (the oracle, from how the case was built)."""
    if case["operation"] != "CREATE":
        return None
    return {"plain": None, "missing": "missing node", "held": "node held by another", "control": "etcd quorum guard"}[case["node"]]


def test_admission_reviews_of_real_objects_reach_every_rule(webhook: Webhook, landscape: dict[str, str], operator: OperatorProcess,
                                                            tally: Counter[str]) -> None:
    refused: Counter[str] = Counter()

    def sure(node: str) -> dict[str, Any]:  # one certain example of each outcome, besides the random ones
        return {"operation": "CREATE", "node": node, "version": "v1beta1", "name": f"sure-{node}", "uid": node, "extra": {}}

    @FUZZ
    @example(case=sure("plain"))
    @example(case=sure("missing"))
    @example(case=sure("held"))
    @example(case=sure("control"))
    @given(case=st.fixed_dictionaries({
        "operation": st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT", "create", ""]),
        "node": st.sampled_from(["plain", "missing", "held", "control"]),
        "version": st.sampled_from(VERSIONS),
        "name": dns_label,
        "uid": st.text(max_size=40),
        "extra": extra_specs,
    }))
    def check(case: dict[str, Any]) -> None:
        node = landscape.get(case["node"], f"missing-{case['name']}")
        implicit = case["version"] == "v1alpha3" and case["name"].startswith("i")  # v1alpha3 may name the node by metadata.name
        obj = _nm(case["version"], node if implicit else case["name"], None if implicit else node, case["extra"])
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": case["uid"], "operation": case["operation"], "object": obj, "userInfo": ADMIN,
                              "kind": {"group": GROUP, "version": case["version"], "kind": KIND},
                              "resource": {"group": GROUP, "version": case["version"], "resource": PLURAL}}}
        tally["webhook: admission reviews of objects, decided against the API"] += 1
        response = webhook.review(VALIDATE, review)
        assert response["uid"] == case["uid"]
        rule = _expected(case, landscape)
        if rule is None:
            assert response["allowed"] is True, response
            return
        assert response["allowed"] is False and response["status"]["code"] == 403, response
        message = response["status"]["message"]
        assert all(words in message for words in RULES[rule]), (rule, message)
        assert repr(node) in message, message
        refused[rule] += 1

    check()
    assert set(refused) == set(RULES), f"admission rules never reached: {set(RULES) - set(refused)}"
    print(f"\nadmission refusals by rule: {dict(refused)}")
    _assert_served(operator, webhook)


def test_the_api_server_relays_each_refusal_to_the_user(cluster: Cluster, admission_webhook: str, landscape: dict[str, str],
                                                        tally: Counter[str]) -> None:
    """Through kubectl and the registered webhook, as a user meets each rule."""
    suffix = uuid.uuid4().hex[:6]
    cases = {"missing node": f"absent-{suffix}", "node held by another": landscape["held"], "etcd quorum guard": landscape["control"]}
    for rule, node in cases.items():
        tally["webhook: NodeMaintenances refused through the API server"] += 1
        obj = _nm("v1beta1", f"refused-{suffix}-{len(rule)}", node, {"reason": "bad input"})
        result = cluster.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
        assert result.returncode != 0, f"{rule}: created"
        assert 'admission webhook "validate.nodemaintenance.kubevirt.io" denied the request' in result.stderr, result.stderr
        assert all(words in result.stderr for words in RULES[rule]), (rule, result.stderr)
    obj = _nm("v1beta1", f"allowed-{suffix}", landscape["plain"], {"reason": "allowed"})
    cluster.kubectl("create", "-f", "-", input=json.dumps(obj))
    delete_nm(cluster, obj["metadata"]["name"])


# ------------------------------------------------------------------ conversion of real objects
def test_objects_of_any_content_read_back_unchanged_in_every_version(cluster: Cluster, operator: OperatorProcess, webhook: Webhook,
                                                                     tally: Counter[str]) -> None:
    """Objects stored through the API server read back in every version (through the webhook) and again
    in v1beta1 without losing a field; stored objects' fields at their limits and in any script."""

    @settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(reason=st.text(min_size=0, max_size=1024),
           grace=st.none() | st.integers(0, 2**63 - 1), timeout=st.none() | st.integers(0, 2**63 - 1),
           labels=st.dictionaries(st.from_regex(r"\A[a-z]{1,10}\Z"), st.from_regex(r"\A[a-z0-9]{0,10}\Z"), max_size=5))
    def check(reason: str, grace: int | None, timeout: int | None, labels: dict[str, str]) -> None:
        name = f"conv-{uuid.uuid4().hex[:8]}"
        drain: dict[str, Any] = {"podSelector": {"matchLabels": labels}}
        if grace is not None:
            drain["gracePeriodSeconds"] = grace
        if timeout is not None:
            drain["timeoutSeconds"] = timeout
        obj = _nm("v1beta1", name, f"absent-{name}", {"reason": reason, "drain": drain})
        tally["webhook: objects converted through the API server"] += 1
        cluster.kubectl("create", "-f", "-", input=json.dumps(obj))
        try:
            for version in VERSIONS:
                read = get(cluster, f"{PLURAL}.{version}.{GROUP}", name)
                assert read is not None and read["apiVersion"] == f"{GROUP}/{version}"
                assert read["spec"]["reason"] == reason
            back = existing(cluster, f"{PLURAL}.v1beta1.{GROUP}", name)
            assert back["spec"]["drain"] == drain
        finally:
            cluster.kubectl("delete", f"{PLURAL}.v1beta1.{GROUP}", name, "--wait=false")

    check()
    _assert_served(operator, webhook)


# ------------------------------------------------------------------ malformed requests
def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _review_of_deep_object(depth: int) -> bytes:
    spec = "[" * depth + "]" * depth
    return (f'{{"request":{{"uid":"d","desiredAPIVersion":"{GROUP}/v1alpha1","objects":[{{"apiVersion":"{GROUP}/v1beta1",'
            f'"kind":"{KIND}","metadata":{{"name":"d"}},"spec":{{"drain":{spec}}}}}]}}}}').encode()


MALFORMED: list[tuple[str, str, bytes, dict[str, str], str]] = [
    # (what, method, body, headers, path) — the path "" means both webhooks
    ("empty body", "POST", b"", {}, ""),
    ("not JSON", "POST", b"\x00\xff garbage {", {}, ""),
    ("invalid UTF-8 in a string", "POST", b'{"request": {"uid": "\xff\xfe"}}', {}, ""),
    ("JSON but not an object", "POST", b"[1, 2, 3]", {}, ""),
    ("a bare string", "POST", b'"review"', {}, ""),
    ("NaN and Infinity", "POST", b'{"request": {"uid": NaN, "objects": [Infinity], "desiredAPIVersion": -Infinity}}', {}, ""),
    ("an integer of 5000 digits", "POST", b'{"request": {"uid": ' + b"9" * 5000 + b"}}", {}, ""),
    ("nesting 100000 deep", "POST", _deep(100_000), {}, ""),
    ("an object nested 990 deep", "POST", _review_of_deep_object(990), {}, CONVERT),
    ("duplicate keys", "POST", b'{"request": {"uid": "a", "uid": "b"}, "request": null}', {}, ""),
    ("text/plain content type", "POST", b'{"request": {}}', {"Content-Type": "text/plain"}, ""),
    ("YAML body and content type", "POST", b"request:\n  uid: x\n", {"Content-Type": "application/yaml"}, ""),
    ("a form", "POST", b"request=1&uid=2", {"Content-Type": "application/x-www-form-urlencoded"}, ""),
    ("multipart", "POST", b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--\r\n",
     {"Content-Type": "multipart/form-data; boundary=b"}, ""),
    ("protobuf content type", "POST", b"\x0a\x03abc", {"Content-Type": "application/vnd.kubernetes.protobuf"}, ""),
    ("gzip that is not gzip", "POST", b"not gzip at all", {"Content-Encoding": "gzip"}, ""),
    ("a gzip bomb (1 KiB to 64 MiB)", "POST", gzip.compress(b"{" + b" " * (64 * 1024 * 1024)), {"Content-Encoding": "gzip"}, CONVERT),
    ("unknown content encoding", "POST", b"{}", {"Content-Encoding": "br2"}, ""),
    ("a body of 9 MiB", "POST", b'{"request": {"objects": ["' + b"x" * (9 * 1024 * 1024) + b'"]}}', {}, ""),
    ("GET", "GET", b"", {}, ""),
    ("PUT", "PUT", b"{}", {}, ""),
    ("DELETE", "DELETE", b"", {}, ""),
    ("unknown path", "POST", b"{}", {}, "/mutate"),
    ("path traversal", "POST", b"{}", {}, "/../../etc/passwd"),
    # Over the 8 KiB a header field may take, and the whole request within one TLS record (16 KiB): the server refuses it
    # having read all of it. One of 64 KiB was refused after its first record, and the server's close, with the rest still
    # unread, reset the connection while the client was sending, so the 400 could not be read.
    ("a header of 12 KiB", "POST", b"{}", {"X-Padding": "a" * 12288}, ""),
    ("a wrong Content-Length", "POST", b"{}", {"Content-Length": "-5"}, ""),
]


@pytest.mark.parametrize("what,method,body,headers,path", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_requests_get_a_clear_4xx_or_a_failed_review(webhook: Webhook, operator: OperatorProcess, tally: Counter[str],
                                                               what: str, method: str, body: bytes, headers: dict[str, str], path: str) -> None:
    for target in [path] if path else [CONVERT, VALIDATE]:
        tally["webhook: malformed HTTP requests"] += 1
        try:
            status, answer = webhook.post(target, body, headers, method)
        except (http.client.HTTPException, ConnectionError) as error:  # refused before any answer: acceptable only as a 4xx path
            pytest.fail(f"{what} on {target}: the connection broke instead of an answer ({error!r})")
        assert status < 500, f"{what} on {target}: {status} {answer[:300]!r}"
        if status == 200:
            response = json.loads(answer)["response"]
            failure = response.get("result", {}).get("message") if target == CONVERT else response.get("status", {}).get("message")
            assert failure, f"{what} on {target} was accepted: {response}"
            assert ("ConversionReview" if target == CONVERT else "AdmissionReview") in failure or "request" in failure or "spec" in failure, failure
        else:
            assert 400 <= status < 500 and answer.strip(), f"{what} on {target}: {status} without a message"
    _assert_served(operator, webhook)


# ------------------------------------------------------------------ slow clients, plain HTTP, old TLS
def _tls(webhook: Webhook) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", webhook.port), timeout=10)
    return webhook.context.wrap_socket(raw, server_hostname="127.0.0.1")


def test_slow_clients_do_not_stop_others_being_served(webhook: Webhook, operator: OperatorProcess, tally: Counter[str]) -> None:
    """Slowloris: connections that never handshake, never finish their headers, or trickle their body."""
    held: list[socket.socket] = []
    try:
        for _ in range(40):  # TCP only, no TLS handshake
            held.append(socket.create_connection(("127.0.0.1", webhook.port), timeout=10))
        for index in range(40):  # headers begun, never finished
            conn = _tls(webhook)
            conn.sendall(f"POST {CONVERT} HTTP/1.1\r\nHost: x\r\nX-Slow-{index}: ".encode())
            held.append(conn)
        for _ in range(40):  # a body promised, ten bytes sent
            conn = _tls(webhook)
            conn.sendall(f"POST {VALIDATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n".encode() + b'{"request"')
            held.append(conn)
        tally["webhook: slow clients (slowloris)"] += len(held)
        for _ in range(5):
            for trickling in held[40:]:
                trickling.sendall(b"a")  # keep trickling
            started = time.monotonic()
            _assert_served(operator, webhook)
            assert time.monotonic() - started < 2, f"a good review took {time.monotonic() - started:.1f}s behind slow clients"
            time.sleep(0.5)
    finally:
        for connection in held:
            connection.close()
    _assert_served(operator, webhook)


def test_plain_http_to_the_tls_port_is_refused_and_the_server_stays_up(webhook: Webhook, operator: OperatorProcess,
                                                                        tally: Counter[str]) -> None:
    for request in (f"POST {CONVERT} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}", f"GET {VALIDATE} HTTP/1.0\r\n\r\n",
                    "\x16\x03\x01\x00\x05hello", "\r\n" * 100):
        tally["webhook: plain HTTP and junk to the TLS port"] += 1
        with socket.create_connection(("127.0.0.1", webhook.port), timeout=10) as conn:
            conn.sendall(request.encode("latin-1"))
            conn.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        # No TLS, no HTTP answer: the server speaks only TLS and closes the connection.
        assert not answer.startswith(b"HTTP/1.1 200"), answer[:200]
    _assert_served(operator, webhook)


def _old_tls_client(ca_pem: bytes, version: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=ca_pem.decode())
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer the old protocol at all
    with pytest.warns(DeprecationWarning, match=rf"^ssl\.TLSVersion\.{version} is deprecated$"):
        context.minimum_version = context.maximum_version = getattr(ssl.TLSVersion, version)
    return context


def _handshake(port: int, context: ssl.SSLContext) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return tls.version() or ""


@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_tls_below_1_2_is_refused(webhook: Webhook, operator: OperatorProcess, tally: Counter[str], version: str, tmp_path: Path) -> None:
    # Control: this client does speak the old version with a server that allows it.
    ca = generate_self_signed(tmp_path, ["127.0.0.1"])
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    permissive.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.warns(DeprecationWarning, match=r"^ssl\.TLSVersion\.TLSv1 is deprecated$"):
        permissive.minimum_version = ssl.TLSVersion.TLSv1
    with socket.create_server(("127.0.0.1", 0)) as listener:
        accepting = threading.Thread(target=lambda: permissive.wrap_socket(listener.accept()[0], server_side=True).close(), daemon=True)
        accepting.start()
        assert _handshake(listener.getsockname()[1], _old_tls_client(ca, version)) == version.replace("_", ".")
        accepting.join(10)
    tally["webhook: TLS handshakes below 1.2"] += 1
    assert operator.ca_pem is not None, "the operator serves a certificate of its own making"
    with pytest.raises(ssl.SSLError) as refused:
        _handshake(webhook.port, _old_tls_client(operator.ca_pem, version))
    # The server ends the handshake (an alert, or closing the connection): the client offered, the server refused.
    assert isinstance(refused.value, ssl.SSLEOFError) or "PROTOCOL_VERSION" in str(refused.value), refused.value
    for good in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        context = ssl.create_default_context(cadata=operator.ca_pem.decode())
        context.minimum_version = context.maximum_version = good
        assert _handshake(webhook.port, context) == good.name.replace("_", ".")
    _assert_served(operator, webhook)

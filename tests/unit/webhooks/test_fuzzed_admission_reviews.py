"""Fuzzed admission reviews that carry NodeMaintenance objects, served over TLS with API access (a fake
API holding nodes, maintenances and the etcd guard): every admission rule refuses at least once, each
refusal names the node, the field and the fix, and a failing API is an answer, never a 5xx."""

from __future__ import annotations

import json
import ssl
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from node_maintenance.api import GROUP, KIND, PLURAL, VERSIONS
from node_maintenance.api.paths import nm_path, node_path
from node_maintenance.client.errors import ApiError
from tests.unit.builders import CONTROL_PLANE_LABEL, FakeApi, etcd_guard, nm, node
from tests.unit.serving import post, review_response, webhooks_served

GUARD_PATH = "/apis/policy/v1/namespaces/openshift-etcd/poddisruptionbudgets/etcd-guard-pdb"  # OpenShift's etcd guard
NODES = {
    "plain": node("plain", labels={}, ready=True),
    "held": node("held", labels={}, ready=True),
    "control": node("control", labels={CONTROL_PLANE_LABEL: ""}, ready=True),
}
HOLDER = nm("holder", "held", version="v1beta1")
GUARD = etcd_guard(0)
RULES = {  # each rule, by the words its refusal carries
    "missing node": ("does not exist", "spec.nodeName", "kubectl get nodes"),
    "node held by another": ("already in maintenance by NodeMaintenance holder", "delete holder first"),
    "etcd quorum guard": ("control-plane node", "etcd quorum guard", "allows no disruption", "wait until"),
    "API unavailable": ("could not check the node", "try again"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext, FakeApi]]:
    # What the admission check reads: the nodes, the maintenance holding node held, and the etcd guard.
    api = FakeApi({**{node_path(name): obj for name, obj in NODES.items()}, nm_path("holder"): HOLDER, GUARD_PATH: GUARD})
    with webhooks_served(tmp_path_factory.mktemp("certs"), api.blocking()) as (port, context):
        yield port, context, api


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),  # JSON has no NaN nor infinity
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=10,
)
cases = st.fixed_dictionaries({
    "operation": st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT"]),
    "node": st.sampled_from(["plain", "held", "control", "missing"]),
    "api": st.sampled_from(["up", "failing"]),
    "version": st.sampled_from(VERSIONS),
    "name": st.from_regex(r"\A[a-z][-a-z0-9]{0,15}\Z").filter(lambda n: n != HOLDER["metadata"]["name"]),
    "uid": st.text(max_size=36),
    "implicit": st.booleans(),
    "extra": st.fixed_dictionaries({}, optional={"reason": st.text(max_size=50), "drain": json_values, "unknown": json_values}),
})


def _expected(case: dict[str, Any]) -> str | None:
    if case["operation"] != "CREATE":
        return None
    if case["api"] == "failing":
        return "API unavailable"
    return {"plain": None, "held": "node held by another", "control": "etcd quorum guard", "missing": "missing node"}[case["node"]]


def test_fuzzed_reviews_of_objects_reach_every_admission_rule(server: tuple[int, ssl.SSLContext, FakeApi]) -> None:
    refused: Counter[str] = Counter()
    api = server[2]

    def sure(node: str, api: str = "up") -> dict[str, Any]:  # one certain example of each outcome, besides the random ones
        return {"operation": "CREATE", "node": node, "api": api, "version": "v1beta1", "name": "sure", "uid": node, "implicit": False, "extra": {}}

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @example(case=sure("plain"))
    @example(case=sure("missing"))
    @example(case=sure("held"))
    @example(case=sure("control"))
    @example(case=sure("plain", "failing"))
    @given(case=cases)
    def check(case: dict[str, Any]) -> None:
        node = case["node"] if case["node"] != "missing" else f"missing-{case['name']}"
        implicit = case["implicit"] and case["version"] == "v1alpha3"  # v1alpha3 names the node by metadata.name
        obj = nm(node if implicit else case["name"], None if implicit else node, version=case["version"], **case["extra"])
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": case["uid"], "operation": case["operation"], "object": obj,
                              "resource": {"group": GROUP, "version": case["version"], "resource": PLURAL}}}
        api.outage = ApiError(503, "ServiceUnavailable", "the API server is shutting down") if case["api"] == "failing" else None
        try:
            response = review_response(server[:2], "/validate-nodemaintenance", review)
        finally:
            api.outage = None
        assert response["uid"] == case["uid"]
        rule = _expected(case)
        if rule is None:
            assert response["allowed"] is True, response
            return
        assert response["allowed"] is False and response["status"]["code"] == 403, response
        message = response["status"]["message"]
        assert all(words in message for words in RULES[rule]), (rule, message)
        refused[rule] += 1

    check()
    assert set(refused) == set(RULES), f"admission outcomes never reached: {set(RULES) - set(refused)}"


@pytest.mark.parametrize("path", ["/convert", "/validate-nodemaintenance"])
def test_a_body_that_cannot_be_decoded_is_a_400_naming_the_fix(server: tuple[int, ssl.SSLContext, FakeApi], path: str) -> None:
    status, answer = post(server[:2], path, b"not gzip at all", {"Content-Encoding": "gzip"})
    assert status == 400 and b"could not be read" in answer and b"Content-Encoding" in answer, (status, answer)


def test_a_deeply_nested_review_is_a_failed_review_not_a_500(server: tuple[int, ssl.SSLContext, FakeApi]) -> None:
    status, answer = post(server[:2], "/convert", b"[" * 100_000 + b"]" * 100_000)
    assert status == 200 and json.loads(answer)["response"]["result"]["status"] == "Failure"
    spec = "[" * 990 + "]" * 990
    deep = (f'{{"request":{{"uid":"d","desiredAPIVersion":"{GROUP}/v1alpha1","objects":[{{"apiVersion":"{GROUP}/v1beta1",'
            f'"kind":"{KIND}","metadata":{{"name":"d"}},"spec":{{"drain":{spec}}}}}]}}}}').encode()
    status, answer = post(server[:2], "/convert", deep)
    result = json.loads(answer)["response"]["result"]
    assert status == 200 and result["status"] == "Failure" and "request" in result["message"], result

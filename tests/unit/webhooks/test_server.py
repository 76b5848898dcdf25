"""The webhook server answers every request in the review's own format over TLS: never a 5xx,
never a dropped connection, whatever the body."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node_maintenance.api import SERVICE_ACCOUNT
from node_maintenance.webhooks.server import admission_response, conversion_reply
from tests.unit.builders import nm, nm_policy, policy_hook, unreachable_api
from tests.unit.serving import post, review_response, webhooks_served

GROUP = "nodemaintenance.kubevirt.io"


def test_conversion_response_echoes_uid_and_converts() -> None:
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "abc",
            "desiredAPIVersion": f"{GROUP}/v1beta1",
            "objects": [nm("n1", None, version="v1alpha3")],
        },
    }
    response = conversion_reply(review).review["response"]
    assert response["uid"] == "abc" and response["result"] == {"status": "Success"}
    assert response["convertedObjects"][0]["spec"]["nodeName"] == "n1"


def test_conversion_failure_is_a_failed_review_with_a_message() -> None:
    response = conversion_reply({"request": {"uid": "x", "desiredAPIVersion": f"{GROUP}/v9", "objects": []}}).review["response"]
    assert response["uid"] == "x" and response["result"]["status"] == "Failure"
    assert "apiVersion" in response["result"]["message"] and "convertedObjects" not in response


def test_admission_response_shapes() -> None:
    assert admission_response("u", None)["response"] == {"uid": "u", "allowed": True}
    denied = admission_response("u", "node 'x' does not exist")["response"]
    assert denied["allowed"] is False and denied["status"]["code"] == 403 and "node 'x'" in denied["status"]["message"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    with webhooks_served(tmp_path_factory.mktemp("certs"), unreachable_api()) as served:
        yield served


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
reviewish = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from(["apiextensions.k8s.io/v1", "x", ""]),
        "request": st.fixed_dictionaries(
            {},
            optional={
                "uid": json_values,
                "desiredAPIVersion": st.sampled_from([f"{GROUP}/v1alpha1", f"{GROUP}/v1alpha3", f"{GROUP}/v1beta1", "v1", 3]),
                "objects": st.lists(
                    st.fixed_dictionaries(
                        {"apiVersion": st.sampled_from([f"{GROUP}/v1alpha1", f"{GROUP}/v1beta1", "bad"]), "kind": st.sampled_from(["NodeMaintenance", "Pod"])},
                        optional={"metadata": json_values, "spec": json_values, "status": json_values},
                    )
                    | json_values,
                    max_size=200,
                ),
            },
        ),
    },
)
bodies = st.binary(max_size=512) | json_values.map(lambda v: json.dumps(v).encode()) | reviewish.map(lambda v: json.dumps(v).encode())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=bodies, path=st.sampled_from(["/convert", "/validate-nodemaintenance", "/validate-nodemaintenancepolicy"]))
def test_fuzzed_reviews_always_get_a_well_formed_answer(server: tuple[int, ssl.SSLContext], body: bytes, path: str) -> None:
    status, reply = post(server, path, body)
    assert status == 200
    answer = json.loads(reply)
    assert isinstance(answer, dict) and isinstance(answer.get("response"), dict)
    if path == "/convert":
        assert answer["response"]["result"]["status"] in ("Success", "Failure")
    else:
        assert answer["response"]["allowed"] in (True, False)


def test_the_policy_webhook_refuses_a_hook_that_would_run_as_the_operator(server: tuple[int, ssl.SSLContext]) -> None:
    def review(service_account: str) -> dict[str, Any]:
        policy = nm_policy("rolling", postMaintenance=policy_hook(serviceAccountName=service_account))
        return {"request": {"uid": "u", "operation": "UPDATE", "object": policy}}

    refused = review_response(server, "/validate-nodemaintenancepolicy", review(SERVICE_ACCOUNT))
    assert refused["allowed"] is False, refused
    assert "spec.postMaintenance.jobTemplate.spec.template.spec.serviceAccountName" in refused["status"]["message"]
    status, answer = post(server, "/validate-nodemaintenancepolicy", json.dumps(review("storage-admin")).encode())
    assert status == 200 and json.loads(answer) == admission_response("u", None), (status, answer)

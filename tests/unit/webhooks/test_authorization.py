"""Through the operator a person can do what they could do themselves, and no more: with authorization on, the webhooks
ask the API server (a SubjectAccessReview of the review's user) whether the author may do what their object asks of the
operator, and refuse it naming the field, the right and the fix; when the API server cannot say, they refuse and say to
try again."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from node_maintenance.api import VALIDATE_PATH, VALIDATE_POLICY_PATH
from node_maintenance.api.paths import SUBJECT_ACCESS_REVIEWS, node_path, policy_path
from node_maintenance.client.errors import Unreachable
from tests.unit.builders import FakeApi, nm, nm_policy, node, policy_hook
from tests.unit.serving import OPERATOR_NAMESPACE, review_response, webhooks_served

LADDER = [{"afterSeconds": 60, "action": "DeletePods"}]
# What each user may do, as (verb, resource, subresource, name); an empty name: any object.
RIGHTS = {
    "requester": {("patch", "nodes", "", "n1"), ("create", "pods", "eviction", "")},
    "escalator": {("patch", "nodes", "", "n1"), ("create", "pods", "eviction", ""), ("escalate", "nodemaintenances", "", "")},
    "viewer": set(),
}
# The namespaces where each user may create Jobs.
JOBS = {"hook-author": {"storage-hooks"}}


def _decide(review: dict[str, Any]) -> dict[str, Any]:
    """A SubjectAccessReview answered from RIGHTS, as the API server's authorizers would."""
    spec = review["spec"]
    asked = spec["resourceAttributes"]
    key = (asked["verb"], asked["resource"], asked.get("subresource", ""), asked.get("name", ""))
    rights = RIGHTS.get(spec["user"], set())
    if (asked["verb"], asked.get("group"), asked["resource"]) == ("create", "batch", "jobs"):
        return {**review, "status": {"allowed": asked.get("namespace") in JOBS.get(spec["user"], set())}}
    return {**review, "status": {"allowed": key in rights or (*key[:3], "") in rights}}


@pytest.fixture(scope="module")
def api() -> FakeApi:
    fake = FakeApi({node_path("n1"): node("n1", labels={"pool": "a"}),
                    policy_path("rolling"): nm_policy("rolling", node_selector={"matchLabels": {"pool": "a"}}, drain={"escalation": LADDER})})
    fake.answer_by("POST", SUBJECT_ACCESS_REVIEWS, _decide)
    return fake


@pytest.fixture(scope="module")
def served(api: FakeApi, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    with webhooks_served(tmp_path_factory.mktemp("certs"), api.blocking(), authorize=True) as running:
        yield running


def _review(obj: dict[str, Any], user: str, operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    request = {"uid": "u", "operation": operation, "object": obj, "userInfo": {"username": user, "groups": ["system:authenticated"]}}
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def test_a_maintenance_asks_of_its_author_what_kubectl_drain_asks(served: tuple[int, ssl.SSLContext]) -> None:
    assert review_response(served, VALIDATE_PATH, _review(nm("nm", "n1", drain={"escalation": []}), "requester"))["allowed"] is True
    refused = review_response(served, VALIDATE_PATH, _review(nm("nm", "n1", drain={"escalation": []}), "viewer"))
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        "NodeMaintenance nm: spec.nodeName: user 'viewer' may not patch nodes/n1; ask an admin to bind the node-maintenance-requester "
        "ClusterRole, which grants what `kubectl drain` needs; spec.nodeName: user 'viewer' may not create pods/eviction in every "
        "namespace; ask an admin to bind the node-maintenance-requester ClusterRole, which grants what `kubectl drain` needs")


def test_an_escalation_its_own_or_a_policys_asks_for_the_right_to_escalate(served: tuple[int, ssl.SSLContext]) -> None:
    own = review_response(served, VALIDATE_PATH, _review(nm("nm", "n1", drain={"escalation": LADDER}), "requester"))
    inherited = review_response(served, VALIDATE_PATH, _review(nm("nm", "n1"), "requester"))
    assert not own["allowed"] and "spec.drain.escalation: user 'requester' may not escalate nodemaintenances" in own["status"]["message"]
    assert not inherited["allowed"] and "inherited from the drain defaults of the policy" in inherited["status"]["message"]
    assert review_response(served, VALIDATE_PATH, _review(nm("nm", "n1", drain={"escalation": LADDER}), "escalator"))["allowed"] is True


def test_an_update_that_adds_a_ladder_is_asked_and_one_of_metadata_alone_is_not(served: tuple[int, ssl.SSLContext], api: FakeApi) -> None:
    before = nm("nm", "n1", drain={"escalation": []})
    added = review_response(served, VALIDATE_PATH, _review(nm("nm", "n1", drain={"escalation": LADDER}), "requester", "UPDATE", before))
    assert added["allowed"] is False
    asked = len(api.calls_to("POST", SUBJECT_ACCESS_REVIEWS))
    finalized = review_response(served, VALIDATE_PATH, _review(nm("nm", "n1", finalizers=["f"], drain={"escalation": []}), "viewer", "UPDATE", before))
    assert finalized["allowed"] is True and len(api.calls_to("POST", SUBJECT_ACCESS_REVIEWS)) == asked


def test_a_policy_whose_drain_defaults_escalate_asks_its_author_the_same(served: tuple[int, ssl.SSLContext]) -> None:
    escalating = nm_policy("p", drain={"escalation": LADDER})
    refused = review_response(served, VALIDATE_POLICY_PATH, _review(escalating, "requester"))
    assert not refused["allowed"] and refused["status"]["message"].startswith("NodeMaintenancePolicy p: spec.drain.escalation: user 'requester'")
    assert review_response(served, VALIDATE_POLICY_PATH, _review(escalating, "escalator"))["allowed"] is True
    assert review_response(served, VALIDATE_POLICY_PATH, _review(nm_policy("q"), "viewer"))["allowed"] is True


@pytest.mark.parametrize(("namespace", "words"), [
    ("other", ("spec.preDrain.namespace: user 'hook-author' may not create jobs.batch in namespace other; name a namespace where you may "
              "create Jobs, or ask an admin to let you create Jobs in namespace other")),
    (None, "spec.preDrain.namespace is not set"),
    (OPERATOR_NAMESPACE, f"spec.preDrain.namespace names the operator's namespace {OPERATOR_NAMESPACE}"),
])
def test_a_hook_asks_its_author_for_creating_jobs_in_its_namespace(served: tuple[int, ssl.SSLContext], namespace: str | None, words: str) -> None:
    refused = review_response(served, VALIDATE_POLICY_PATH, _review(nm_policy("p", preDrain=policy_hook(namespace)), "hook-author"))
    assert not refused["allowed"] and refused["status"]["message"].startswith(f"NodeMaintenancePolicy p: {words}"), refused
    admitted = nm_policy("p", preDrain=policy_hook("storage-hooks"), postMaintenance=policy_hook("storage-hooks"))
    assert review_response(served, VALIDATE_POLICY_PATH, _review(admitted, "hook-author"))["allowed"] is True


def test_a_hook_whose_author_s_right_cannot_be_asked_is_refused_with_a_message_to_try_again(served: tuple[int, ssl.SSLContext],
                                                                                          api: FakeApi) -> None:
    api.fail("POST", SUBJECT_ACCESS_REVIEWS, Unreachable("connection refused"))
    refused = review_response(served, VALIDATE_POLICY_PATH, _review(nm_policy("p", preDrain=policy_hook("storage-hooks")), "hook-author"))
    assert refused["allowed"] is False
    assert "could not ask the API server whether user 'hook-author' may create jobs.batch in namespace storage-hooks" in refused["status"]["message"]
    assert refused["status"]["message"].endswith("try again")


def test_when_the_api_server_cannot_say_the_object_is_refused_with_a_message_to_try_again(served: tuple[int, ssl.SSLContext], api: FakeApi) -> None:
    api.fail("POST", SUBJECT_ACCESS_REVIEWS, Unreachable("connection refused"))
    refused = review_response(served, VALIDATE_PATH, _review(nm("nm", "n1", drain={"escalation": []}), "escalator"))
    assert refused["allowed"] is False
    assert "could not ask the API server whether user 'escalator' may patch nodes/n1" in refused["status"]["message"]
    assert refused["status"]["message"].endswith("try again")


def test_a_review_that_names_no_user_is_refused_without_asking(served: tuple[int, ssl.SSLContext], api: FakeApi) -> None:
    review = _review(nm("nm", "n1", drain={"escalation": []}), "requester")
    del review["request"]["userInfo"]
    asked = len(api.calls_to("POST", SUBJECT_ACCESS_REVIEWS))
    refused = review_response(served, VALIDATE_PATH, review)
    assert refused["allowed"] is False and "request.userInfo names no user" in refused["status"]["message"]
    assert len(api.calls_to("POST", SUBJECT_ACCESS_REVIEWS)) == asked

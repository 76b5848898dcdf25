"""One object nobody can read breaks no other review: a stored NodeMaintenance whose spec.nodeName is no string
leaves every other CREATE decided, an object under review that cannot be read is refused naming the field and the
fix, and a conversion review converts an object with a malformed parked annotation along with the rest."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from node_maintenance.api.paths import nm_path, node_path
from tests.unit.builders import FakeApi, nm, node
from tests.unit.serving import review_response, webhooks_served

GROUP = "nodemaintenance.kubevirt.io"
PARKED = f"conversion.{GROUP}/v1beta1-fields"
BROKEN = nm("broken", None, version="v1beta1")
BROKEN["spec"]["nodeName"] = {"name": "n2"}  # stored through a parked annotation before conversions checked it


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    api = FakeApi({node_path("n1"): node("n1", labels={}), nm_path("broken"): BROKEN})
    with webhooks_served(tmp_path_factory.mktemp("certs"), api.blocking()) as served:
        yield served


def _create(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "c", "operation": "CREATE", "object": obj}}


def test_a_stored_maintenance_that_cannot_be_read_leaves_every_create_decided(server: tuple[int, ssl.SSLContext]) -> None:
    assert review_response(server, "/validate-nodemaintenance", _create(nm("a", "n1", version="v1beta1"))) == {"uid": "c", "allowed": True}


def test_an_object_whose_node_name_cannot_be_read_is_refused_naming_the_field(server: tuple[int, ssl.SSLContext]) -> None:
    obj = nm("a", None, version="v1beta1")
    obj["spec"]["nodeName"] = {"name": "n1"}
    response = review_response(server, "/validate-nodemaintenance", _create(obj))
    assert response["allowed"] is False, response
    assert "spec.nodeName is an object, not a string" in response["status"]["message"]


def test_a_malformed_parked_annotation_fails_no_conversion_review(server: tuple[int, ssl.SSLContext]) -> None:
    malformed = nm("malformed", "n1", version="v1beta1", drain={"timeoutSeconds": 5})
    malformed["metadata"]["annotations"] = {PARKED: "{not json"}
    review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
              "request": {"uid": "v", "desiredAPIVersion": f"{GROUP}/v1alpha1", "objects": [malformed, nm("fine", "n1", version="v1beta1")]}}
    response = review_response(server, "/convert", review)
    assert response["result"] == {"status": "Success"}, response
    assert [obj["metadata"]["name"] for obj in response["convertedObjects"]] == ["malformed", "fine"]
    assert json.loads(response["convertedObjects"][0]["metadata"]["annotations"][PARKED]) == {"spec": {"drain": {"timeoutSeconds": 5}}}

"""Conversion reviews served over TLS: an object whose annotation parks forged or malformed fields is converted
without them, with the rest of the review, and what was dropped is told: a warning naming the object in the log, a
Warning event on it."""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.unit.builders import FakeApi, nm
from tests.unit.serving import review_response, webhooks_served

GROUP = "nodemaintenance.kubevirt.io"
PARKED = f"conversion.{GROUP}/v1beta1-fields"
EVENTS = "/api/v1/namespaces/default/events"  # where the events of a cluster-scoped object go
FORGED = json.dumps({"spec": {"nodeName": "master-0", "drain": {"escalation": [{"afterSeconds": 0, "action": "DeletePods"}]}},
                     "status": {"phase": "Succeeded"}})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext, FakeApi]]:
    api = FakeApi()
    with webhooks_served(tmp_path_factory.mktemp("certs"), api.blocking()) as (port, context):
        yield port, context, api


def _parking(obj: dict[str, Any], parked: str, uid: str) -> dict[str, Any]:
    obj["metadata"].update(annotations={PARKED: parked}, uid=uid, resourceVersion="7")
    return obj


def _events_about(api: FakeApi, name: str) -> list[dict[str, Any]]:
    """The events posted about NodeMaintenance ``name``, once the first has come (they are posted in the background)."""
    deadline = time.monotonic() + 10
    while True:
        found = [call.body for call in api.calls_to("POST", EVENTS) if call.body["involvedObject"]["name"] == name]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_a_forged_annotation_is_not_stored_and_what_was_dropped_is_told(server: tuple[int, ssl.SSLContext, FakeApi], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    forged = _parking(nm("forged", "worker-1", version="v1alpha1", status={"phase": "Running"}), FORGED, "u-forged")
    review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
              "request": {"uid": "r", "desiredAPIVersion": f"{GROUP}/v1beta1", "objects": [forged]}}
    for _ in range(2):  # read twice in another version: told once
        response = review_response(server[:2], "/convert", review)
        assert response["result"] == {"status": "Success"}
        stored = response["convertedObjects"][0]
        assert stored["spec"] == {"nodeName": "worker-1"} and stored["status"] == {"phase": "Running"}
    warnings = [record for record in caplog.records if getattr(record, "nodeMaintenance", None) == "forged"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "spec.nodeName" in warnings[0].getMessage() and "spec.drain.escalation[0].afterSeconds" in warnings[0].getMessage()
    events = _events_about(server[2], "forged")
    assert len(events) == 1, events
    assert events[0]["type"] == "Warning" and events[0]["reason"] == "ConversionDroppedFields"
    assert events[0]["involvedObject"] == {"apiVersion": f"{GROUP}/v1alpha1", "kind": "NodeMaintenance", "name": "forged", "uid": "u-forged"}
    assert "status.phase" in events[0]["message"]

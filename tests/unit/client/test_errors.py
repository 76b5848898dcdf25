"""The API layer's typed errors: one type per answer, with what the server said and when to try again."""

from __future__ import annotations

import json

import pytest

from node_maintenance.client import errors as kube


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, kube.Invalid), (403, kube.Forbidden), (404, kube.NotFound), (409, kube.Conflict), (410, kube.Gone),
     (401, kube.Unauthorized), (412, kube.Conflict), (422, kube.Invalid), (429, kube.TooManyRequests), (500, kube.ServerError), (503, kube.ServerError), (418, kube.ApiError)],
)
def test_each_answer_gets_its_type(status: int, kind: type) -> None:
    error = kube.api_error(status, "Reason", json.dumps({"message": "what happened"}))
    assert type(error) is kind and error.status == status and error.message == "what happened"
    assert "what happened" in str(error)


def test_too_many_requests_carries_retry_after_from_header_or_status_details() -> None:
    assert kube.api_error(429, "TooManyRequests", "{}", "7").retry_after == 7
    body = {"message": "Cannot evict pod", "details": {"retryAfterSeconds": 10}}
    assert kube.api_error(429, "TooManyRequests", body, None).retry_after == 10
    assert kube.api_error(429, "TooManyRequests", "not json", "soon").retry_after == 0


def test_only_a_refusal_naming_a_disruption_budget_is_the_budget_s() -> None:
    by_budget = {"message": "Cannot evict pod as it would violate the pod's disruption budget.",
                 "details": {"causes": [{"type": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}}
    refused = kube.api_error(429, "TooManyRequests", by_budget)
    assert isinstance(refused, kube.TooManyRequests) and refused.by_budget
    flow_control = {"message": "Too many requests, please try again later.", "details": {"retryAfterSeconds": 1}}
    limited = kube.api_error(429, "TooManyRequests", flow_control, "1")
    assert isinstance(limited, kube.TooManyRequests) and not limited.by_budget and limited.retry_after == 1

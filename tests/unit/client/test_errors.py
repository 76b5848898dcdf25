"""The API layer's typed errors: one type per answer, with what the server said and when to try again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from node_maintenance.client import errors


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, errors.Invalid), (403, errors.Forbidden), (404, errors.NotFound), (409, errors.Conflict), (410, errors.Gone),
     (401, errors.Unauthorized), (412, errors.Conflict), (422, errors.Invalid), (429, errors.TooManyRequests), (500, errors.ServerError), (503, errors.ServerError), (418, errors.ApiError)],
)
def test_each_answer_gets_its_type(status: int, kind: type) -> None:
    error = errors.api_error(status, "Reason", json.dumps({"message": "what happened"}))
    assert type(error) is kind and error.status == status and error.message == "what happened"
    assert "what happened" in str(error)


def _too_many_requests(body: str | dict[str, Any], retry_after: str | None) -> errors.TooManyRequests:
    error = errors.api_error(429, "TooManyRequests", body, retry_after)
    assert isinstance(error, errors.TooManyRequests)
    return error


def test_too_many_requests_carries_retry_after_from_header_or_status_details() -> None:
    assert _too_many_requests("{}", "7").retry_after == 7
    body = {"message": "Cannot evict pod", "details": {"retryAfterSeconds": 10}}
    assert _too_many_requests(body, None).retry_after == 10
    assert _too_many_requests("not json", "soon").retry_after == 0


def test_only_a_refusal_naming_a_disruption_budget_is_the_budget_s() -> None:
    by_budget = {"message": "Cannot evict pod as it would violate the pod's disruption budget.",
                 "details": {"causes": [{"type": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}}
    refused = errors.api_error(429, "TooManyRequests", by_budget)
    assert isinstance(refused, errors.TooManyRequests) and refused.by_budget
    flow_control = {"message": "Too many requests, please try again later.", "details": {"retryAfterSeconds": 1}}
    limited = errors.api_error(429, "TooManyRequests", flow_control, "1")
    assert isinstance(limited, errors.TooManyRequests) and not limited.by_budget and limited.retry_after == 1

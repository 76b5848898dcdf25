"""The API layer's typed errors, the retry delay of refused removals, and budget in-flight accounting."""

from __future__ import annotations

import json

import pytest

from node_maintenance.client import errors as kube
from node_maintenance.client.http import AsyncKube
from node_maintenance.runtime.budgets import IN_FLIGHT_SECONDS, BudgetWatch
from node_maintenance.runtime.executor import BACKOFF_MAX_SECONDS, retry_delay


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


def test_retry_delay_honours_retry_after_backs_off_and_caps() -> None:
    assert retry_delay(1, 0, 0) == 1 and retry_delay(3, 0, 0) == 4
    assert retry_delay(1, 10, 0) == 10  # never sooner than the server asked
    assert retry_delay(30, 0, 0) == BACKOFF_MAX_SECONDS
    assert retry_delay(2, 0, 0.999) == pytest.approx(2 * 1.2, rel=1e-3)  # jitter spreads by at most a fifth


def test_sent_evictions_count_until_the_budget_lists_the_pod_as_disrupted() -> None:
    budgets = BudgetWatch(AsyncKube.__new__(AsyncKube))
    budgets.mirror.objects["app/web"] = {"metadata": {"name": "web", "namespace": "app"}, "status": {"disruptedPods": {}}}
    budgets.sent("app/web", "web-0")
    budgets.sent("app/web", "web-1")
    assert budgets.in_flight()["app/web"].count == 2
    assert 0 < budgets.in_flight()["app/web"].expires_in <= IN_FLIGHT_SECONDS  # counted no longer, should no event come
    budgets.mirror.objects["app/web"]["status"]["disruptedPods"] = {"web-0": "2026-01-01T00:00:00Z"}
    assert budgets.in_flight()["app/web"].count == 1
    budgets.returned("app/web", "web-1")  # refused: it does not count
    assert budgets.in_flight() == {}

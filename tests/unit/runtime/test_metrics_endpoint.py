"""/metrics over HTTPS to whom the API server allows: a bearer token it authenticates (TokenReview) whose user may get
/metrics (SubjectAccessReview); 401 without a token or with one it does not accept, 403 for a user not allowed, 503
while it cannot say; its answers kept a minute per token."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.api.paths import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from node_maintenance.client.errors import KubeError, Unreachable
from node_maintenance.runtime.metrics_endpoint import KEPT_SECONDS, Scrapers
from tests.unit.builders import FakeApi

USERS = {"scraper-token": "system:serviceaccount:monitoring:prometheus", "stranger-token": "system:serviceaccount:default:app"}


def _token_review(review: dict[str, Any]) -> dict[str, Any]:
    user = USERS.get(review["spec"]["token"])
    return {**review, "status": {"authenticated": user is not None, **({"user": {"username": user, "groups": ["g"]}} if user else {})}}


def _access_review(review: dict[str, Any]) -> dict[str, Any]:
    spec = review["spec"]
    allowed = spec["user"] == USERS["scraper-token"] and spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    return {**review, "status": {"allowed": allowed}}


@pytest.fixture
def api() -> FakeApi:
    fake = FakeApi()
    fake.answer_by("POST", TOKEN_REVIEWS, _token_review)
    fake.answer_by("POST", SUBJECT_ACCESS_REVIEWS, _access_review)
    return fake


@pytest.mark.parametrize(("token", "status"), [("", 401), ("forged", 401), ("stranger-token", 403), ("scraper-token", 200)])
def test_who_may_read_the_metrics(api: FakeApi, token: str, status: int) -> None:
    assert Scrapers(api.blocking()).status(token) == status


def test_an_answer_is_kept_a_minute_per_token_and_the_token_itself_never(api: FakeApi) -> None:
    now = [0.0]
    scrapers = Scrapers(api.blocking(), clock=lambda: now[0])
    assert [scrapers.status("scraper-token") for _ in range(3)] == [200] * 3
    assert len(api.calls_to("POST", TOKEN_REVIEWS)) == 1
    now[0] += KEPT_SECONDS
    assert scrapers.status("scraper-token") == 200 and len(api.calls_to("POST", TOKEN_REVIEWS)) == 2
    assert "scraper-token" not in repr(vars(scrapers))


def test_while_the_api_server_cannot_say_nothing_is_kept(api: FakeApi) -> None:
    scrapers = Scrapers(api.blocking())
    api.fail("POST", TOKEN_REVIEWS, Unreachable("connection refused"))
    with pytest.raises(KubeError):
        scrapers.status("scraper-token")
    assert scrapers.status("scraper-token") == 200

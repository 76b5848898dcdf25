"""The NodeMaintenance admission check reads the cluster; a read the API server answers 429 (while a CRD's
storage re-initialises after an upgrade, say) is made again after its Retry-After, within the review's time."""

from __future__ import annotations

import asyncio

import pytest

from node_maintenance.api.paths import nm_path, node_path
from node_maintenance.client.errors import TooManyRequests
from node_maintenance.webhooks import server
from tests.unit.builders import FakeApi, nm, node

BUSY = TooManyRequests(429, "TooManyRequests", "storage is (re)initializing", 1.0)


def test_a_read_answered_429_is_made_again_and_the_review_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "FACTS_RETRY_MIN_SECONDS", 0.0)
    monkeypatch.setattr(server, "FACTS_RETRY_MAX_SECONDS", 0.01)
    api = FakeApi({node_path("n1"): node("n1")})
    api.fail("GET", nm_path(), BUSY)
    facts = asyncio.run(server.read_facts(api.blocking(), nm("nm", "n1")))
    assert facts.node is not None and facts.maintenances == []
    assert len(api.calls_to("GET", nm_path())) == 2


def test_still_busy_after_the_last_try_the_review_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "FACTS_RETRY_MIN_SECONDS", 0.0)
    monkeypatch.setattr(server, "FACTS_RETRY_MAX_SECONDS", 0.01)
    api = FakeApi({node_path("n1"): node("n1")})
    api.fail("GET", nm_path(), BUSY, times=server.FACTS_TRIES)
    with pytest.raises(TooManyRequests):
        asyncio.run(server.read_facts(api.blocking(), nm("nm", "n1")))
    assert len(api.calls_to("GET", nm_path())) == server.FACTS_TRIES

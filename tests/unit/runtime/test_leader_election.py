"""Leader election through an API server out of reach: acquiring waits for it instead of crashing the
process (found by the control-plane fault tests, where a restarted API server made the operator exit)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from node_maintenance.client.errors import Unreachable
from node_maintenance.runtime import leader


class FlakyKube:
    """Refuses ``failures`` calls as an unreachable server does, then serves a missing Lease."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.created: list[dict[str, Any]] = []

    def get(self, path: str) -> dict[str, Any] | None:
        if self.failures:
            self.failures -= 1
            raise Unreachable("connection reset by peer")
        return None

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        self.created.append(body)
        return body


def test_acquire_waits_for_an_api_server_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "LEADER_RENEW_SECONDS", 0.02)
    kube = FlakyKube(failures=3)
    elector = leader.LeaderElector(kube, "ns", "me")  # type: ignore[arg-type]
    asyncio.run(asyncio.wait_for(elector.acquire(), 5))
    assert kube.failures == 0
    assert [lease["spec"]["holderIdentity"] for lease in kube.created] == ["me"]


def test_hold_gives_up_once_renewals_failed_for_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "LEADER_RENEW_SECONDS", 0.02)
    monkeypatch.setattr(leader, "LEADER_LEASE_SECONDS", 0.1)
    elector = leader.LeaderElector(FlakyKube(failures=1000), "ns", "me")  # type: ignore[arg-type]
    asyncio.run(asyncio.wait_for(elector.hold(), 5))  # returns: the caller must stop reconciling

"""Leader election through an API server out of reach: acquiring waits for it instead of crashing the
process, and holding gives leadership up once renewals failed for as long as the Lease lasts (found by the
control-plane fault tests, where a restarted API server made the operator exit)."""

from __future__ import annotations

import asyncio

import pytest

from node_maintenance.api.paths import lease_path
from node_maintenance.client.errors import Unreachable
from node_maintenance.runtime import leader
from tests.unit.builders import FakeApi

LEASE = lease_path("ns", leader.LEASE_NAME)


def test_acquire_waits_for_an_api_server_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "LEADER_RENEW_SECONDS", 0.02)
    kube = FakeApi()  # three reads refused as by a server out of reach, then no Lease
    kube.fail("GET", LEASE, Unreachable("connection reset by peer"), times=3)
    elector = leader.LeaderElector(kube.blocking(), "ns", "me")  # type: ignore[arg-type]
    asyncio.run(asyncio.wait_for(elector.acquire(), 5))
    assert not kube.remaining("GET", LEASE)
    created = [call.body for call in kube.calls if call.method != "GET"]
    assert [lease["spec"]["holderIdentity"] for lease in created] == ["me"]


def test_hold_gives_up_once_renewals_failed_for_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "LEADER_RENEW_SECONDS", 0.02)
    monkeypatch.setattr(leader, "LEADER_LEASE_SECONDS", 0.1)
    kube = FakeApi()
    kube.outage = Unreachable("connection reset by peer")
    elector = leader.LeaderElector(kube.blocking(), "ns", "me")  # type: ignore[arg-type]
    asyncio.run(asyncio.wait_for(elector.hold(), 5))  # returns: the caller must stop reconciling

"""Leader election: expiry judged on the reader's own clock whatever the holder's clock says, every request
ended by the renewal deadline, an API server out of reach waited for, and the lead given up in time."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from node_maintenance.api import timestamps
from node_maintenance.api.paths import lease_path
from node_maintenance.client.errors import Unreachable
from node_maintenance.runtime import leader
from tests.unit.builders import BlockingFakeApi, FakeApi

LEASE = lease_path("ns", leader.LEASE_NAME)


class Clock:
    """A monotonic clock the test moves, or that moves ``tick`` seconds at every reading (the elector's pace
    then depends on what it does, never on how fast the machine runs it)."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 1000.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def held(holder: str, skew_seconds: float, renewals: int = 0) -> dict[str, object]:
    """The leader Lease as ``holder`` writes it with a clock ``skew_seconds`` off ours, after ``renewals`` renewals."""
    stamp = timestamps.micro_time(timestamps.now() + datetime.timedelta(seconds=skew_seconds + renewals))
    return {"metadata": {"name": leader.LEASE_NAME, "resourceVersion": str(10 + renewals)},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": leader.LEADER_LEASE_SECONDS, "renewTime": stamp,
                     "acquireTime": stamp, "leaseTransitions": 0}}


def a_standby(api: FakeApi, clock: Clock) -> leader.LeaderElector:
    return leader.LeaderElector(api.blocking(), "ns", "standby", clock=clock)


def attempt(elector: leader.LeaderElector, clock: Clock) -> bool:
    return elector.try_acquire_or_renew(clock() + leader.LEADER_RENEW_DEADLINE_SECONDS)


@pytest.mark.parametrize("skew_seconds", [-30, 30], ids=["holder's clock 30 s behind", "holder's clock 30 s ahead"])
def test_a_lease_its_holder_renews_is_never_taken_whatever_its_clock(skew_seconds: float) -> None:
    api, clock = FakeApi(), Clock()
    standby = a_standby(api, clock)
    for renewal in range(20):  # a minute of renewals every 3 s: the record changes each time
        api.objects[LEASE] = held("leader", skew_seconds, renewal)
        assert not attempt(standby, clock), f"taken at renewal {renewal}"
        clock.now += 3
    assert api.writes() == []


@pytest.mark.parametrize("skew_seconds", [-30, 30], ids=["holder's clock 30 s behind", "holder's clock 30 s ahead"])
def test_a_lease_no_longer_renewed_is_taken_one_duration_after_its_last_change_was_seen(skew_seconds: float) -> None:
    api, clock = FakeApi(), Clock()
    standby = a_standby(api, clock)
    api.objects[LEASE] = held("leader", skew_seconds)
    assert not attempt(standby, clock)  # first seen now: the holder has a whole duration from here
    clock.now += leader.LEADER_LEASE_SECONDS - 0.5
    assert not attempt(standby, clock)
    clock.now += 1
    assert attempt(standby, clock)
    (taken,) = [call.body for call in api.calls if call.method == "PUT"]
    assert taken["spec"]["holderIdentity"] == "standby" and taken["spec"]["leaseTransitions"] == 1
    assert taken["metadata"]["resourceVersion"] == "10"  # a compare-and-swap on what was read


def test_a_lease_given_up_is_taken_at_once_and_its_own_is_kept() -> None:
    api, clock = FakeApi(), Clock()
    released = held("leader", 0)
    released["spec"]["holderIdentity"] = ""  # type: ignore[index]
    api.objects[LEASE] = released
    assert attempt(a_standby(api, clock), clock)
    api.objects[LEASE] = held("standby", 0)
    assert attempt(a_standby(api, clock), clock)  # a restarted replica of the same identity keeps its Lease


def test_every_request_of_an_attempt_ends_by_the_deadline() -> None:
    api, clock = FakeApi(), Clock()
    standby = a_standby(api, clock)
    assert standby.try_acquire_or_renew(clock() + 4)
    assert [call.timeout for call in api.calls] == [4, 4]
    with pytest.raises(Unreachable, match="deadline"):
        standby.try_acquire_or_renew(clock() - 1)


class HangsOnce(BlockingFakeApi):
    """The API as ``FakeApi`` answers, except that its first request hangs as long as it is let wait, then fails."""

    def __init__(self, api: FakeApi, clock: Clock) -> None:
        super().__init__(api)
        self.clock, self.hung = clock, False

    def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: object = None,
                content_type: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        if not self.hung:
            self.hung = True
            self.clock.now += timeout or 0
            raise Unreachable("timed out: a connection that died without a reset")
        return super().request(method, path, query=query, body=body, content_type=content_type, timeout=timeout)


def test_one_hung_request_does_not_cost_the_lead(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(leader, "LEADER_RETRY_SECONDS", 0.001)
    api, clock = FakeApi(), Clock()
    elector = leader.LeaderElector(HangsOnce(api, clock), "ns", "me", clock=clock)
    with pytest.raises(TimeoutError):  # hold() returns only once the lead is lost
        asyncio.run(asyncio.wait_for(elector.hold(), 0.5))
    assert clock.now - 1000 == leader.LEADER_REQUEST_SECONDS < leader.LEADER_RENEW_DEADLINE_SECONDS
    assert [call.body["spec"]["holderIdentity"] for call in api.calls if call.method != "GET"][:1] == ["me"]  # renewed after it
    assert "lost leadership" not in caplog.text


def test_a_lead_held_ends_when_cancelled_even_as_an_attempt_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's shutdown cancels the lead it holds; a cancellation that comes just as a renewal attempt has
    ended (its answer in, the elector not woken yet) must still end it."""
    monkeypatch.setattr(leader, "LEADER_RETRY_SECONDS", 0)
    clock = Clock()
    elector = leader.LeaderElector(FakeApi().blocking(), "ns", "me", clock=clock)
    attempts = 0

    async def scenario() -> bool:
        loop = asyncio.get_running_loop()

        def answered(*_: object) -> asyncio.Future[bool]:
            """Every attempt has its answer at once; after many, should hold() still renew, one fails past the deadline
            so that it returns and the test ends."""
            nonlocal attempts
            attempts += 1
            if attempts > 100:
                clock.now += 2 * leader.LEADER_RENEW_DEADLINE_SECONDS
            answer: asyncio.Future[bool] = loop.create_future()
            answer.set_result(attempts <= 100)
            return answer

        monkeypatch.setattr(loop, "run_in_executor", answered)
        held = asyncio.create_task(elector.hold())
        for _ in range(2):  # hold() sleeps its retry period, then waits on the attempt that has already ended
            await asyncio.sleep(0)
        held.cancel()
        await asyncio.wait({held}, timeout=5)
        return held.cancelled()

    assert asyncio.run(scenario()), f"hold() renewed on after it was cancelled ({attempts} attempts)"


def test_acquire_waits_for_an_api_server_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "LEADER_RETRY_SECONDS", 0.02)
    api = FakeApi()  # three reads refused as by a server out of reach, then no Lease
    api.fail("GET", LEASE, Unreachable("connection reset by peer"), times=3)
    elector = leader.LeaderElector(api.blocking(), "ns", "me")
    asyncio.run(asyncio.wait_for(elector.acquire(), 5))
    assert not api.remaining("GET", LEASE)
    assert [call.body["spec"]["holderIdentity"] for call in api.calls if call.method != "GET"] == ["me"]


def test_hold_gives_the_lead_up_once_no_renewal_succeeded_by_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "LEADER_RETRY_SECONDS", 0.001)
    api = FakeApi()
    api.outage = Unreachable("connection reset by peer")
    # Each attempt reads the clock a few times: a second a reading, a deadline of 10 s allows a few attempts.
    elector = leader.LeaderElector(api.blocking(), "ns", "me", clock=Clock(tick=1.0))
    asyncio.run(asyncio.wait_for(elector.hold(), 5))  # returns: the caller must stop reconciling
    assert len(api.calls) >= 2  # renewals were tried until the deadline


"""A watch that came back after failures starts its backoff afresh at the next failure (found by the
control-plane fault tests: after an API server restart every later reconnect waited up to 30 s)."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from node_maintenance.api.paths import PODS
from node_maintenance.client import watch
from node_maintenance.client.errors import Silent
from tests.unit.builders import FakeApi


def _reset() -> ConnectionResetError:
    return ConnectionResetError("connection reset by peer")


def test_backoff_starts_afresh_once_the_watch_is_back(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(watch, "RETRY_FIRST_SECONDS", 0.1)
    # Three watches fail, one serves an event and fails, one more fails; then the watch stays open. Lists return nothing.
    kube = FakeApi()
    kube.script("GET", PODS, {"metadata": {"resourceVersion": "1"}, "items": []})
    kube.script_watch(PODS, [_reset()], [_reset()], [_reset()],
                      [{"type": "ADDED", "object": {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "2"}}}, _reset()],
                      [_reset()])

    async def run() -> None:
        mirror = watch.Mirror(kube, PODS, lambda _: None)
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(kube.idle.wait(), 10)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with caplog.at_level(logging.WARNING, logger=watch.__name__):
        asyncio.run(run())
    delays = [float(m) for m in re.findall(r"resuming in ([0-9.]+)s", caplog.text)]
    # Three failures back off; the event shows the watch back, so the next failure waits the first delay again.
    assert delays[:5] == [0.1, 0.2, 0.4, 0.1, 0.2], delays


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [re.sub(r" in [0-9.]+s:.*", "", record.getMessage()) for record in caplog.records]


def _run_until_idle(mirror: watch.Mirror, kube: FakeApi) -> None:
    async def run() -> None:
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(kube.idle.wait(), 10)
        assert mirror.failure == ""
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())


def test_a_watch_back_after_a_failure_says_so_once_naming_its_selection(caplog: pytest.LogCaptureFixture) -> None:
    # The server accepts each watch; the first breaks at once, the second stays open.
    kube = FakeApi()
    kube.script("GET", PODS, {"metadata": {"resourceVersion": "1"}, "items": []})
    kube.script_watch(PODS, [_reset()])
    with caplog.at_level(logging.INFO, logger=watch.__name__):
        _run_until_idle(watch.Mirror(kube, PODS, lambda _: None, field_selector="spec.nodeName=n1"), kube)
    name = f"{PODS}?fieldSelector=spec.nodeName=n1"  # one drain's pods: many watch the same path
    assert _said(caplog) == [f"watch of {name} failed, resuming", f"watch of {name} is current again"], _said(caplog)


def test_a_listing_that_makes_the_objects_current_again_says_so(caplog: pytest.LogCaptureFixture) -> None:
    kube = FakeApi()
    kube.fail("GET", PODS, _reset(), times=1)
    kube.script("GET", PODS, {"metadata": {"resourceVersion": "1"}, "items": []})
    with caplog.at_level(logging.INFO, logger=watch.__name__):
        _run_until_idle(watch.Mirror(kube, PODS, lambda _: None), kube)
    assert _said(caplog) == [f"watch of {PODS} failed, resuming", f"watch of {PODS} is current again"], _said(caplog)


def test_a_silent_watch_resumes_at_once_and_what_it_keeps_never_counts_as_stale(caplog: pytest.LogCaptureFixture) -> None:
    # An idle watch reaches the inactivity timeout (the API server sends no bookmark for a kind nobody wrote since
    # it started). Resuming from where it stood loses nothing, so the objects never count as stale and the caller is
    # not told to look at everything again: the policies would otherwise hold, and reword, every maintenance in line.
    kube = FakeApi()
    kube.script("GET", PODS, {"metadata": {"resourceVersion": "1"}, "items": []})
    kube.script_watch(PODS, [Silent("nothing heard for 90s")], [{"type": "ADDED", "object": {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "2"}}},
                                                                Silent("nothing heard for 90s")])
    told: list[str | None] = []
    stale: list[str] = []

    def changed(key: str | None) -> None:
        told.append(key)
        stale.append(mirror.failure)

    mirror = watch.Mirror(kube, PODS, changed)
    with caplog.at_level(logging.INFO, logger=watch.__name__):
        _run_until_idle(mirror, kube)
    assert told == [None, "ns/p"] and stale == ["", ""], (told, stale)  # the first listing, then the one change
    assert [(call.query or {}).get("resourceVersion") for call in kube.calls_to("WATCH")] == ["1", "1", "2"]  # resumed where it stood
    assert _said(caplog).count(f"watch of {PODS} failed silently, resuming at once from where it stood: nothing heard for 90s") == 2

"""A watch that came back after failures starts its backoff afresh at the next failure (found by the
control-plane fault tests: after an API server restart every later reconnect waited up to 30 s)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from node_maintenance.client import watch


class Flaky:
    """Fails three watches, serves one event and fails, fails once more; lists return nothing."""

    def __init__(self) -> None:
        self.script = ["fail", "fail", "fail", "event", "fail"]

    async def request(self, method: str, path: str, query: dict | None = None) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    async def watch(self, path: str, query: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        step = self.script.pop(0) if self.script else "hang"
        if step == "hang":
            await asyncio.Event().wait()
        if step == "event":
            yield {"type": "ADDED", "object": {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "2"}}}
        raise ConnectionResetError("connection reset by peer")


def test_backoff_starts_afresh_once_the_watch_is_back(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(watch, "RETRY_FIRST_SECONDS", 0.1)
    kube = Flaky()

    async def run() -> None:
        mirror = watch.Mirror(kube, "/api/v1/pods", lambda _: None)  # type: ignore[arg-type]
        task = asyncio.create_task(mirror.run())
        while kube.script:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with caplog.at_level(logging.WARNING, logger=watch.__name__):
        asyncio.run(run())
    delays = [float(m) for m in re.findall(r"resuming in ([0-9.]+)s", caplog.text)]
    # Three failures back off; the event shows the watch back, so the next failure waits the first delay again.
    assert delays[:5] == [0.1, 0.2, 0.4, 0.1, 0.2], delays

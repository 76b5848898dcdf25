"""The reconciler's start waits out an API server out of reach: reading the CRD and migrating the storage
version are tried again until they succeed, then the reconciler runs (found by the soak: a restart during a
network fault crashed in the migration or the CRD read, and the process exited)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from node_maintenance.api import HUB
from node_maintenance.client.credentials import Credentials
from node_maintenance.client.errors import Unreachable
from node_maintenance.client.http import Kube
from node_maintenance.runtime import main

CRD = {"spec": {"versions": [{"name": HUB, "served": True, "storage": True}]}, "status": {"storedVersions": [HUB]}}


def test_crd_read_and_migration_wait_out_an_unreachable_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = [Unreachable("connection refused"), CRD]
    migrations = [Unreachable("Remote end closed connection without response"), 0]
    started: list[str] = []

    def step(queue: list[Any]) -> Any:
        value = queue.pop(0)
        if isinstance(value, BaseException):
            raise value
        return value

    running = threading.Event()

    def run_kopf(kube: Any, version: str, stop: threading.Event, *_: Any) -> None:
        started.append(version)
        running.set()
        stop.wait()

    monkeypatch.setattr(main, "read_crd", lambda kube: step(reads) if reads else CRD)
    monkeypatch.setattr(main, "migrate_storage_version", lambda kube: step(migrations))
    monkeypatch.setattr(main, "run_kopf", run_kopf)
    monkeypatch.setattr(main, "MIGRATION_RETRY_SECONDS", 0.05)

    async def reconcile() -> bool:
        # Leadership ends once the reconciler runs: however long the retries took, they came first.
        holding = asyncio.create_task(asyncio.to_thread(running.wait, 15))
        return await main.reconcile(Kube(Credentials(server="https://unused.invalid")), holding, asyncio.Event(), "", "ns", "")

    assert asyncio.run(asyncio.wait_for(reconcile(), 20)) is True
    assert started == [HUB] and not reads and not migrations

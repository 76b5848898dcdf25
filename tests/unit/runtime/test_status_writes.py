"""A status write carries the object's resourceVersion, so an earlier write of ours the server carries out late is
refused rather than put an older status back; an object changed since is read again once."""

from __future__ import annotations

import asyncio

import pytest

from node_maintenance.api.paths import policy_path
from node_maintenance.client.errors import Conflict, NotFound
from node_maintenance.runtime.status_writes import write_status
from tests.unit.builders import FakeApi, nm_policy

PATH = policy_path("p")
STATUS: dict[str, list[str]] = {"conditions": []}


def _conflict() -> Conflict:
    return Conflict(409, "Conflict", "the object has been modified; please apply your changes to the latest version")


def _versions(api: FakeApi) -> list[str | None]:
    return [call.body["metadata"]["resourceVersion"] for call in api.calls_to("PATCH", f"{PATH}/status")]


def test_the_write_carries_the_resource_version_it_was_decided_on() -> None:
    api = FakeApi({PATH: nm_policy("p", resource_version="9")})
    asyncio.run(write_status(api, PATH, "7", STATUS))
    assert _versions(api) == ["7"] and api.calls_to("GET") == []


def test_after_a_conflict_the_object_is_read_again_once_and_the_status_written_as_decided() -> None:
    api = FakeApi({PATH: nm_policy("p", resource_version="9")})
    api.fail("PATCH", f"{PATH}/status", _conflict())
    asyncio.run(write_status(api, PATH, "7", STATUS))
    assert _versions(api) == ["7", "9"] and [c.body["status"] for c in api.calls_to("PATCH")] == [STATUS, STATUS]


def test_a_second_conflict_and_an_object_gone_are_the_caller_s_to_try_again() -> None:
    api = FakeApi({PATH: nm_policy("p", resource_version="9")})
    api.fail("PATCH", f"{PATH}/status", _conflict(), times=2)
    with pytest.raises(Conflict):
        asyncio.run(write_status(api, PATH, "7", STATUS))
    gone = FakeApi()
    gone.script("PATCH", f"{PATH}/status", _conflict(), NotFound(404, "NotFound", "nodemaintenancepolicies \"p\" not found"))
    with pytest.raises(NotFound):
        asyncio.run(write_status(gone, PATH, "7", STATUS))
    assert _versions(gone) == ["7", None]

"""A watch resumes from the last resourceVersion it saw (bookmarks too) and lists again only on 410 Gone."""

from __future__ import annotations

import asyncio

from node_maintenance.api.paths import BUDGETS, PODS
from node_maintenance.client.errors import Gone
from node_maintenance.client.watch import Mirror
from tests.unit.builders import FakeApi, script_watch_scene, watched


def _scene(path: str) -> FakeApi:
    api = FakeApi()
    script_watch_scene(api, path)
    return api


def test_resumes_from_the_last_version_and_relists_on_gone() -> None:
    api = _scene(PODS)
    changes: list[set[str]] = []

    async def scenario() -> Mirror:
        mirror = Mirror(api, PODS, lambda _: changes.append(set(mirror.objects)), field_selector="spec.nodeName=n1")
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(api.idle.wait(), 5)
        task.cancel()
        return mirror

    mirror = asyncio.run(scenario())
    assert [(call.query or {})["resourceVersion"] for call in api.calls_to("WATCH")] == ["10", "13", "20"]  # after the bookmark, then from the fresh listing
    assert not api.remaining("GET", PODS) and set(mirror.objects) == {"ns/c"}  # both listings served
    assert changes == [{"ns/a"}, {"ns/a", "ns/b"}, {"ns/a", "ns/b", "other/d"}, {"ns/b", "other/d"}, {"ns/b"}, {"ns/c"}]
    assert all((call.query or {})["fieldSelector"] == "spec.nodeName=n1" for call in api.calls)
    assert "managedFields" not in mirror.objects["ns/c"]["metadata"]


def test_objects_are_indexed_by_namespace_through_changes_and_relists() -> None:
    api = _scene(BUDGETS)
    seen: list[tuple[list[str], list[str]]] = []

    def names(namespace: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in mirror.in_namespace(namespace))

    async def scenario() -> None:
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(api.idle.wait(), 5)
        task.cancel()

    mirror = Mirror(api, BUDGETS, lambda _: seen.append((names("ns"), names("other"))))
    asyncio.run(scenario())
    assert seen == [(["a"], []), (["a", "b"], []), (["a", "b"], ["d"]), (["b"], ["d"]), (["b"], []), (["c"], [])]
    assert names("absent") == []


def _run(api: FakeApi, mirror: Mirror) -> None:
    async def scenario() -> None:
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(api.idle.wait(), 5)
        task.cancel()

    asyncio.run(scenario())


def test_callers_are_told_which_object_changed_and_only_of_changes_to_what_they_keep() -> None:
    api = FakeApi()
    api.script("GET", BUDGETS, {"metadata": {"resourceVersion": "10"}, "items": [watched("a", "9")]})
    api.script_watch(BUDGETS, [{"type": "MODIFIED", "object": watched("a", "11")},  # only its resourceVersion differs
                               {"type": "ADDED", "object": watched("d", "12", "other")}])
    told: list[str | None] = []
    kept = lambda obj: {"metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"]}}  # noqa: E731
    _run(api, Mirror(api, BUDGETS, told.append, slim=kept))
    assert told == [None, "other/d"]  # the listing (anything may have changed), then the one real change


def test_listings_come_in_pages_from_the_watch_cache_and_after_410_gone_from_the_latest_state() -> None:
    api = FakeApi()
    api.script("GET", PODS, {"metadata": {"resourceVersion": "10", "continue": "page-2"}, "items": [watched("a", "9")]},
               {"metadata": {"resourceVersion": "10"}, "items": [watched("b", "9")]},
               {"metadata": {"resourceVersion": "20"}, "items": [watched("c", "19")]})
    api.script_watch(PODS, [Gone(410, "Expired", "too old resource version")])
    mirror = Mirror(api, PODS, lambda _: None, field_selector="spec.nodeName=n1")
    _run(api, mirror)
    first, second, after_gone = (call.query for call in api.calls_to("GET", PODS))
    assert first == {"fieldSelector": "spec.nodeName=n1", "limit": "500", "resourceVersion": "0"}  # the watch cache
    assert second == {"fieldSelector": "spec.nodeName=n1", "limit": "500", "continue": "page-2"}
    assert after_gone == {"fieldSelector": "spec.nodeName=n1", "limit": "500"}  # never older than what was seen
    assert set(mirror.objects) == {"ns/c"}

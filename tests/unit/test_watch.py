"""A watch resumes from the last resourceVersion it saw (bookmarks too) and lists again only on 410 Gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from node_maintenance.client.errors import Gone
from node_maintenance.client.watch import Mirror


def _obj(name: str, version: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version, "managedFields": [{"manager": "x"}]}}


class ScriptedApi:
    """Lists and watch streams as a server would send them, one script entry per watch request."""

    def __init__(self) -> None:
        self.listings = [{"metadata": {"resourceVersion": "10"}, "items": [_obj("a", "9")]},
                         {"metadata": {"resourceVersion": "20"}, "items": [_obj("c", "19")]}]
        self.streams: list[list[dict[str, Any]] | Exception] = [
            [{"type": "ADDED", "object": _obj("b", "11")}, {"type": "ADDED", "object": _obj("d", "11", "other")},
             {"type": "DELETED", "object": _obj("a", "12")}, {"type": "DELETED", "object": _obj("d", "12", "other")},
             {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}}],
            Gone(410, "Expired", "too old resource version"),
        ]
        self.queries: list[dict[str, str]] = []
        self.watched_from: list[str] = []
        self.idle = asyncio.Event()

    async def request(self, method: str, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        self.queries.append(dict(query or {}))
        return self.listings.pop(0)

    async def watch(self, path: str, query: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        self.queries.append(dict(query))
        self.watched_from.append(query["resourceVersion"])
        if not self.streams:
            self.idle.set()
            await asyncio.Event().wait()
        script = self.streams.pop(0)
        if isinstance(script, Exception):
            raise script
        for event in script:
            yield event


def test_resumes_from_the_last_version_and_relists_on_gone() -> None:
    api = ScriptedApi()
    changes: list[set[str]] = []

    async def scenario() -> Mirror:
        mirror = Mirror(api, "/api/v1/pods", lambda _: changes.append(set(mirror.objects)), field_selector="spec.nodeName=n1")  # type: ignore[arg-type]
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(api.idle.wait(), 5)
        task.cancel()
        return mirror

    mirror = asyncio.run(scenario())
    assert api.watched_from == ["10", "13", "20"]  # after the bookmark, then from the fresh listing
    assert not api.listings and set(mirror.objects) == {"ns/c"}  # both listings served
    assert changes == [{"ns/a"}, {"ns/a", "ns/b"}, {"ns/a", "ns/b", "other/d"}, {"ns/b", "other/d"}, {"ns/b"}, {"ns/c"}]
    assert all(q["fieldSelector"] == "spec.nodeName=n1" for q in api.queries)
    assert "managedFields" not in mirror.objects["ns/c"]["metadata"]


def test_objects_are_indexed_by_namespace_through_changes_and_relists() -> None:
    api = ScriptedApi()
    seen: list[tuple[list[str], list[str]]] = []

    def names(namespace: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in mirror.in_namespace(namespace))

    async def scenario() -> None:
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(api.idle.wait(), 5)
        task.cancel()

    mirror = Mirror(api, "/apis/policy/v1/poddisruptionbudgets", lambda _: seen.append((names("ns"), names("other"))))  # type: ignore[arg-type]
    asyncio.run(scenario())
    assert seen == [(["a"], []), (["a", "b"], []), (["a", "b"], ["d"]), (["b"], ["d"]), (["b"], []), (["c"], [])]
    assert names("absent") == []


def _run(api: ScriptedApi, mirror: Mirror) -> None:
    async def scenario() -> None:
        task = asyncio.create_task(mirror.run())
        await asyncio.wait_for(api.idle.wait(), 5)
        task.cancel()

    asyncio.run(scenario())


def test_callers_are_told_the_namespace_and_only_of_changes_to_what_they_keep() -> None:
    api = ScriptedApi()
    api.listings = api.listings[:1]
    api.streams = [[{"type": "MODIFIED", "object": _obj("a", "11")},  # only its resourceVersion differs
                    {"type": "ADDED", "object": _obj("d", "12", "other")}]]
    told: list[str | None] = []
    kept = lambda obj: {"metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"]}}  # noqa: E731
    _run(api, Mirror(api, "/apis/policy/v1/poddisruptionbudgets", told.append, slim=kept))  # type: ignore[arg-type]
    assert told == [None, "other"]  # the listing (anything may have changed), then the one real change


def test_a_budget_change_wakes_only_the_drains_of_its_namespace() -> None:
    from node_maintenance.runtime.budgets import BudgetWatch

    api = ScriptedApi()
    api.streams = api.streams[:1]
    api.listings = api.listings[:1]
    woken: list[str] = []
    budgets = BudgetWatch(api)  # type: ignore[arg-type]

    async def scenario() -> None:
        for drain, namespaces in (("ns drain", {"ns"}), ("other drain", {"other"}), ("idle drain", set())):
            budgets.subscribe(lambda drain=drain: woken.append(drain), lambda namespaces=namespaces: namespaces)
        await asyncio.wait_for(api.idle.wait(), 5)
        await budgets.stop()

    asyncio.run(scenario())
    # The listing wakes every drain; then b in ns, d in other, a in ns, d in other.
    assert woken.count("idle drain") == 1
    assert woken.count("ns drain") == 3 and woken.count("other drain") == 3

"""A list+watch of one selection of objects, kept current in memory.

The watch resumes from the last resourceVersion it saw (bookmarks included) when the server ends
it, and lists again only when that version is gone (410). While a list or watch fails, ``failure`` says
why: what is kept may be stale until the server has accepted a watch again. A watch that fell silent resumes at once,
and counts as failing only if resuming fails. Callers are told of every change of what
they keep of the objects (``slim``) through a callback, with the "namespace/name" of the object that changed;
they read ``objects`` (or one namespace's, indexed) then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any, cast
from urllib.parse import urlencode

from node_maintenance.api.objects import key_of
from node_maintenance.client.errors import Gone, Silent
from node_maintenance.client.pages import PAGE
from node_maintenance.client.protocol import KubeApi

# Server-side duration of one watch request; the next one resumes where it ended.
WATCH_SECONDS = 290
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
log = logging.getLogger(__name__)
# Told the "namespace/name" of the object that changed ("/name" for a cluster-scoped one), or None after a listing.
OnChange = Callable[[str | None], None]


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop what no decision reads and costs the most memory."""
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


class Mirror:
    """The objects at ``path`` matching ``field_selector``; ``synced`` once the first listing is in."""

    def __init__(self, kube: KubeApi, path: str, on_change: OnChange, *, field_selector: str | None = None, label_selector: str | None = None,
                 slim: Callable[[dict[str, Any]], dict[str, Any]] = without_managed_fields, from_cache: bool = True) -> None:
        self.kube = kube
        self.slim = slim  # what of each object is kept
        self.from_cache = from_cache  # the first listing may come from the API server's watch cache (a few ms behind)
        self.path = path
        self.query = {key: value for key, value in (("fieldSelector", field_selector), ("labelSelector", label_selector)) if value}
        # What the log calls this list+watch: the path with its selectors, since many drains watch one path apart.
        self.name = f"{path}?{urlencode(self.query, safe='=/,')}" if self.query else path
        self.on_change = on_change
        self.objects: dict[str, dict[str, Any]] = {}
        self._by_namespace: dict[str, dict[str, dict[str, Any]]] = {}
        self.synced = asyncio.Event()
        self.failure = ""  # why the objects may be stale now ("" while the list+watch is current)

    async def run(self) -> None:
        version: str | None = None
        expired = False  # the last watch ended with 410 Gone
        delay = RETRY_FIRST_SECONDS
        while True:
            try:
                if version is None:
                    version = await self._list(consistent=expired or not self.from_cache)
                query = {**self.query, "resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_SECONDS)}
                async for event in self.kube.watch(self.path, query, on_open=self.opened):
                    delay = RETRY_FIRST_SECONDS  # the watch is back: a later failure starts the backoff afresh
                    version = event["object"]["metadata"]["resourceVersion"]
                    self.take(event)
                delay = RETRY_FIRST_SECONDS
            except Gone:
                log.info("watch of %s expired (410 Gone): listing again", self.name)
                version, expired = None, True  # too old to resume from: list again, no older than that
            except Silent as error:
                # Resumed at once from the last version seen, which replays whatever a gone connection missed: the
                # objects count as stale only if that fails. Declaring them stale now would hold, and reword, every
                # maintenance in line for the instant a reconnect takes, each time an idle watch (hook Jobs in a
                # cluster that never ran one get no bookmark) reaches the inactivity timeout.
                log.info("watch of %s failed silently, resuming at once from where it stood: %s", self.name, error)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the server may be briefly away; resume from where we were
                self.failure = str(error) or type(error).__name__
                log.warning("watch of %s failed, resuming in %.1fs: %s", self.name, delay, self.failure)
                await asyncio.sleep(delay)
                delay = min(RETRY_MAX_SECONDS, delay * 2)

    def opened(self) -> None:
        """The server accepted a watch from where the objects stand: they are current again. What the watch
        calls when it opens; a caller that keeps the objects current by other means (a test) calls it too."""
        if self._current():
            self.on_change(None)

    def _current(self) -> bool:
        """The objects are current again; whether they were stale until now, which the log says once."""
        if not self.failure:
            return False
        log.info("watch of %s is current again", self.name)
        self.failure = ""
        return True

    def take(self, event: dict[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED or BOOKMARK), taken as the watch takes each: its object is
        kept (``slim``) or dropped, and the caller told of it unless nothing of what is kept changed (a
        heartbeat, a bookmark). The watch hands every event here; a test hands the events it makes up."""
        obj = event["object"]
        if event["type"] == "BOOKMARK":
            return
        if event["type"] == "DELETED":
            self._drop(obj)
        elif not self._put(self.slim(obj)):
            return
        self.on_change(key_of(obj))

    def in_namespace(self, namespace: str) -> Iterable[dict[str, Any]]:
        """The objects of one namespace, without a pass over all of them (many drains ask at every change)."""
        return self._by_namespace.get(namespace, {}).values()

    def _put(self, obj: dict[str, Any]) -> bool:
        """Keep ``obj``; whether it differs from what was kept."""
        key = key_of(obj)
        if self.objects.get(key) == obj:
            return False
        self.objects[key] = obj
        self._by_namespace.setdefault(obj["metadata"].get("namespace", ""), {})[key] = obj
        return True

    def _drop(self, obj: dict[str, Any]) -> None:
        key, namespace = key_of(obj), obj["metadata"].get("namespace", "")
        self.objects.pop(key, None)
        same = self._by_namespace.get(namespace, {})
        same.pop(key, None)
        if not same:
            self._by_namespace.pop(namespace, None)

    async def refresh(self) -> None:
        """List once, without a watch: what is kept becomes what the server holds now. The caller, which asked,
        is not told."""
        await self._list(consistent=not self.from_cache, tell=False)

    async def _list(self, consistent: bool, tell: bool = True) -> str:
        """List page by page (PAGE objects at most). The first listing is served from the API server's
        watch cache (resourceVersion 0), as client-go's reflectors list, sparing etcd a read per watch when many
        start at once; one after a 410 Gone must not go back in time, and reads the latest state, as do the
        listings of a Mirror that decides from its first listing (``from_cache`` False)."""
        query = {**self.query, "limit": str(PAGE), **({} if consistent else {"resourceVersion": "0"})}
        kept: list[dict[str, Any]] = []  # slimmed page by page: the whole objects of one page at most are held
        while True:
            listing = await self.kube.request("GET", self.path, query=query)
            kept.extend(self.slim(obj) for obj in listing.get("items") or [])
            token = (listing.get("metadata") or {}).get("continue")
            if not token:
                break
            query = {**self.query, "limit": str(PAGE), "continue": token}
        self.objects, self._by_namespace = {}, {}
        for obj in kept:
            self._put(obj)
        self.synced.set()
        self._current()
        if tell:
            self.on_change(None)
        return cast(str, listing["metadata"]["resourceVersion"])

"""Which NodeMaintenances have a drain engine: one that is worked on has one; one waiting in line has none.

kopf brings every change of a NodeMaintenance (``handlers``), and the engines are run from here. A maintenance is
worked on from the moment the finalizer is on it (before that, a node taken could be left behind by a deletion that
nothing guards): without a policy at once, under one from the moment its policy grants it a slot. A maintenance in
line costs its row, the body it last showed without the managedFields nobody reads: no task, no engine, no watch.
Its engine ends (it parks) after the step that found it waiting, its status written as the line asks; a new one
starts when the policies tell it its standing changed, when the object changes, or when that step asked to look again
(one timer for every parked maintenance, the soonest first). What a parked engine remembers of a write the object
does not show yet goes to the next, so that no write is made twice while the watch brings it back.

No engine starts before the policies' CRD has been looked at: until then each would only wait, and a fleet restarted
in the middle would hold a task for each of its thousands of maintenances. Nor before every NodeMaintenance's name
has been listed: an engine takes a node whose recorded holder does not exist, so it must know every holder that does.
The names come from a watch of their own, kept as names only, and from what kopf has shown: a name counts as existing
until both have seen it go, so neither watch's lag lets a node held by a living NodeMaintenance be taken. kopf's own
index would hold them too, but kopf fills it with a toggle per object that every object's worker waits on: a fleet of
5,000 restarted in the middle waited 7 minutes for its first handler.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import functools
import heapq
import logging
from collections.abc import Collection
from typing import Any

from node_maintenance import api
from node_maintenance.api.paths import nm_path
from node_maintenance.client.errors import KubeError
from node_maintenance.client.watch import Mirror
from node_maintenance.drain.memory import Memory
from node_maintenance.runtime import giving_back
from node_maintenance.runtime.engine import Engine, Shared

FINALIZER = f"{api.GROUP}/finalizer"
# How soon the hand-back of a NodeMaintenance gone without its deletion, or an engine that failed, is tried again.
RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Running:
    """One NodeMaintenance's engine, the task running it, and its body as last shown (the engine reads it each step)."""

    body: dict[str, Any]
    engine: Engine | None = None
    task: asyncio.Task[None] | None = None


def row(body: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a NodeMaintenance between its changes: all an engine reads, not its managedFields."""
    return {**body, "metadata": {k: v for k, v in body["metadata"].items() if k != "managedFields"}}


def name_only(body: dict[str, Any]) -> dict[str, Any]:
    """What the watch of names keeps of a NodeMaintenance."""
    return {"metadata": {"name": body["metadata"]["name"]}}


def logger(body: dict[str, Any]) -> logging.LoggerAdapter[logging.Logger]:
    return logging.LoggerAdapter(logging.getLogger("node_maintenance"),
                                 {"nodeMaintenance": body["metadata"]["name"], "node": (body.get("spec") or {}).get("nodeName", "")})


class Maintenances:
    """The rows of every NodeMaintenance and the engines of those worked on."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.listed: Mirror | None = None  # every name, deleting or not, once running
        self._shown: set[str] = set()  # the names kopf has shown and not yet shown deleted
        # What the engines' tasks run in: that of kopf's handlers, whose event queue ``kopf.event`` posts through.
        self.context: contextvars.Context | None = None
        self.rows: dict[str, dict[str, Any]] = {}  # with the finalizer on and no deletion under way, as last shown
        self.running: dict[str, Running] = {}
        self.ready = False  # the policies' CRD looked at: engines may start
        self._remembered: dict[str, Memory] = {}  # parked, what their engine wrote and the object does not show yet
        self._due: list[tuple[float, str]] = []  # parked, when to look again (the loop's clock), soonest first
        self._timer: asyncio.TimerHandle | None = None
        self.giving_back: dict[str, asyncio.Task[None]] = {}  # maintenances gone without their deletion

    async def run(self) -> None:
        """Start the engines once they can do more than wait, then keep them until cancelled."""
        shared = self.shared
        self.listed = listed = Mirror(shared.kube, nm_path(version=shared.version), lambda _: None, slim=name_only, from_cache=False)
        listing = asyncio.create_task(listed.run(), name="NodeMaintenance names")
        try:
            if shared.policies:
                await shared.policies.ready.wait()
            await listed.synced.wait()
            self.ready = True
            self.tell(None)
            await asyncio.Event().wait()
        finally:
            listing.cancel()
            await asyncio.gather(listing, return_exceptions=True)
            await self.stop()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        tasks = [*(r.task for r in self.running.values() if r.task is not None), *self.giving_back.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ----------------------------------------------------------------- hearing
    def seen(self, body: dict[str, Any], *, deleted: bool = False) -> None:
        """A NodeMaintenance as its watch shows it now (``deleted``: its last state, the object gone)."""
        name = body["metadata"]["name"]
        self._remembered.pop(name, None)  # a newer version than any its parked engine wrote to
        if deleted:
            self._shown.discard(name)
        else:
            self._shown.add(name)
        kept = row(body)
        if running := self.running.get(name):
            running.body = kept  # being deleted, it reads so and takes nothing more
        if deleted or body["metadata"].get("deletionTimestamp") or FINALIZER not in (body["metadata"].get("finalizers") or []):
            self.rows.pop(name, None)
        else:
            self.rows[name] = kept
        self.wake(name)

    def tell(self, names: Collection[str] | None) -> None:
        """The policies' say on these maintenances may have changed (None: on any)."""
        for name in list(self.rows) if names is None else names:
            self.wake(name)

    def wake(self, name: str) -> None:
        """Its engine plans again; a parked maintenance gets a new one."""
        running = self.running.get(name)
        if running is not None:
            if running.engine is not None:
                running.engine.wake()
            return
        body = self.rows.get(name)
        if body is None or not self.ready:
            return
        running = self.running[name] = Running(body)
        running.engine = Engine(self.shared, lambda: dict(running.body), logger(body), self.exists,
                                parked=functools.partial(self._parked, name, running), remembered=self._remembered.pop(name, None))
        running.task = asyncio.create_task(self._drive(name, running), name=f"drain {name}",
                                           context=self.context.copy() if self.context is not None else None)

    def exists(self, name: str) -> bool:
        """Whether a NodeMaintenance of that name exists, deleting or not: a holder a node records holds it only then."""
        return name in self._shown or (self.listed is not None and f"/{name}" in self.listed.objects)

    # ----------------------------------------------------------------- running
    async def _drive(self, name: str, running: Running) -> None:
        assert running.engine is not None
        try:
            await running.engine.run()
        except Exception:  # an error the engine could not handle: said, and a new engine tries again
            logger(running.body).exception("the drain failed; trying again in %.0fs", RETRY_SECONDS)
            self._look_at(name, RETRY_SECONDS)
        finally:
            if self.running.get(name) is running:
                del self.running[name]
        if running.engine.gone:  # gone without our deletion: nothing else gives its node back
            logger(running.body).warning("the NodeMaintenance is gone without its deletion being seen; its node is given back")
            self.giving_back[name] = task = asyncio.create_task(self._given_back(running.body), name=f"give back {name}")
            task.add_done_callback(lambda done: self.giving_back.pop(name, None) if self.giving_back.get(name) is done else None)

    def _parked(self, name: str, running: Running, remembered: Memory, recheck: float | None) -> None:
        """Its engine ends here, its step having found the maintenance waiting in line (``Engine``, given ``parked``)."""
        if self.running.get(name) is running:
            del self.running[name]
        if dict(remembered.stored) != (running.body.get("status") or {}) or remembered.sent:
            self._remembered[name] = remembered
        if recheck is not None:
            self._look_at(name, recheck)

    def _look_at(self, name: str, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        heapq.heappush(self._due, (loop.time() + seconds, name))
        if self._timer is None or self._timer.when() > self._due[0][0]:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(self._due[0][0], self._looked)

    def _looked(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        while self._due and self._due[0][0] <= now:
            self.wake(heapq.heappop(self._due)[1])
        if self._due:
            self._timer = asyncio.get_running_loop().call_at(self._due[0][0], self._looked)

    # ----------------------------------------------------------------- ending
    async def stop_drain(self, name: str) -> None:
        """End the NodeMaintenance's drain, and return only once its engine has ended: a take still in flight when the
        drain was cancelled lands before the node is read to be given back (the soak found a node left held by a
        deleted NodeMaintenance when this returned at once)."""
        running = self.running.get(name)
        if running is None or running.task is None:
            return
        running.task.cancel()
        await asyncio.gather(running.task, return_exceptions=True)

    async def give_back(self, body: dict[str, Any]) -> None:
        """The drain stopped first (it must not take the node again once given back), a policy's postMaintenance Job
        run, then the node given back; raises ``giving_back.Later`` until it can be."""
        await self.stop_drain(body["metadata"]["name"])
        shared = self.shared
        given = copy.deepcopy(dict(body))
        executor = giving_back.executor(shared.kube, given, shared.version, shared.event, logger(given), shared.lease_namespace)
        if shared.policies:  # a policy's postMaintenance Job runs before the node is given back
            await giving_back.before(shared.policies, given, executor)
        await giving_back.end(shared.kube, given, executor, shared.active)

    async def _given_back(self, body: dict[str, Any]) -> None:
        """Give the node back as the deletion handler does, trying again until it is done."""
        while True:
            try:
                await self.give_back(body)
                return
            except giving_back.Later as later:
                delay = later.delay
            except KubeError as error:
                logger(body).warning("giving the node back failed; trying again: %s", error)
                delay = RETRY_SECONDS
            await asyncio.sleep(delay)

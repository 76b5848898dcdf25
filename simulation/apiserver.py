"""A simulated API server in one process: the operator's ``KubeApi``, answered as kube-apiserver answers, on the
simulation's clock, with the faults the simulation draws.

It keeps what the operator relies on of the real one: one resourceVersion sequence over every object; a merge patch
carrying a resourceVersion refused with 409 when the object changed; status changed only through ``/status`` (and
spec only through the object); finalizers that keep a deleted object until they are removed; graceful pod deletion
that the simulated kubelet finishes; the Eviction API's budget check (:mod:`simulation.disruption`); watches that
resume from a resourceVersion, send an object leaving or entering a selection as DELETED or ADDED, end after their
timeout, and answer 410 Gone once the history they would resume from is compacted.

Two doors: the operator's (``request``, ``get``, ``patch``, ``watch``: faulted as the simulation draws, and every
write recorded in ``writes``), and the cluster's own actors' (``create``, ``update``, ``remove``: users, the
controllers, the kubelet; never faulted, never recorded as the operator's). Nothing here reads the wall clock or a
random source: a run is a function of the calls made and of the faults drawn.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import enum
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from node_maintenance.api import timestamps
from node_maintenance.client.credentials import Credentials
from node_maintenance.client.errors import ApiError, Unreachable, api_error
from simulation import budgets, disruption
from simulation.locations import Location, locate, typed
from simulation.selectors import fields_match, labels_match, merged

Obj = dict[str, Any]
# Resources whose status is a subresource: the object's own writes leave it, ``/status`` writes only it.
WITH_STATUS = frozenset({"nodes", "pods", "poddisruptionbudgets", "jobs", "nodemaintenances", "nodemaintenancepolicies"})
# Resources whose metadata.generation counts changes of what is not metadata or status.
GENERATIONS = frozenset({"poddisruptionbudgets", "jobs", "nodemaintenances", "nodemaintenancepolicies", "customresourcedefinitions"})


class Fault(enum.StrEnum):
    """What the simulation makes of one request of the operator's."""

    NONE = "none"
    REFUSED = "refused"  # a 500 before anything was applied
    THROTTLED = "throttled"  # a 429 before anything was applied
    TIMEOUT = "timeout"  # no answer, nothing applied
    LOST = "lost"  # applied, then the answer lost: the caller sees a timeout
    LATE = "late"  # the caller sees a timeout, and the write is applied later, as stored then (SimulatedApi.late_seconds)
    # A write: no answer, nothing applied, and the operator killed as the step ends (SimulatedApi.killed), what it did
    # in between standing; a read so faulted is refused.
    KILLED = "killed"


class Write(NamedTuple):
    """One write the operator asked for, whether it was applied, and the resourceVersion the API had reached once it
    answered (what orders it against the other actors' changes of the same step)."""

    at: datetime.datetime
    method: str
    path: str
    body: Any
    applied: bool
    revision: int
    sent: int = 0  # carried out late (Fault.LATE): the API's resourceVersion when the operator sent it, and gave up


@dataclass(frozen=True)
class Change:
    """One entry of the watch history: the object before (None: created) and after (None: removed)."""

    revision: int
    location: Location
    before: Obj | None
    after: Obj | None


def _error(code: int, reason: str, message: str, causes: list[Obj] | None = None, about: Obj | None = None) -> ApiError:
    """The typed error the operator's client makes of the Status the real server would send (``about``: the kind, the
    resource's plural, and name of the object it is about, as a 404 for a missing object names them)."""
    details: Obj = {**(about or {}), **({"causes": causes} if causes else {})}
    return api_error(code, reason, {"kind": "Status", "status": "Failure", "reason": reason, "message": message, "code": code, "details": details})


class SimulatedApi:
    """The objects of one simulated cluster, and the operator's requests to it."""

    def __init__(self, clock: Callable[[], datetime.datetime], faults: Callable[[str, str], Fault] = lambda _m, _p: Fault.NONE) -> None:
        self.clock = clock
        self.faults = faults
        self.credentials = Credentials(server="https://simulated.invalid")
        self.may_write: Callable[[], bool] = lambda: True
        self.objects: dict[Location, Obj] = {}
        self._kept: dict[str, tuple[int, list[Obj]]] = {}  # a collection as kept() last listed it, at that revision
        self.revision = 0
        self.history: list[Change] = []
        self.compacted = 0  # watches from an older resourceVersion are answered 410 Gone
        self.writes: list[Write] = []
        self.listed: list[tuple[str, int]] = []  # each collection the operator had a listing of, at the revision listed
        # For each collection, the revision the operator's listing or watch has brought it up to: what it can know of
        # it (a watch gone silent, or failed and not resumed yet, brings nothing more). Keyed by path alone: it speaks
        # for a collection the operator reads whole, as the policies (selected reads of nodes share their path).
        self.told: dict[str, int] = {}
        self.silent = False  # open watches deliver nothing while set (a watch gone quiet without ending)
        self.latency = 0.0  # seconds a request takes there and back: others' requests and events come meanwhile
        # How long a write the caller gave up on (Fault.LATE) waits in the server before it is applied: a request queued
        # behind others past the client's timeout, or one sent by an operator killed since, is carried out all the same.
        self.late_seconds = 10.0
        # A request met Fault.KILLED: its operator is to be killed and started again as the step ends (Simulation.step).
        self.killed = False
        self.removed: dict[Location, Obj] = {}  # each object removed, as it last was (an edit just before counts)
        self._uids = 0
        self._changed = asyncio.Event()
        self._dropped = 0  # bumped to end every open watch, as a server restart does

    # ------------------------------------------------ the cluster's own door
    def create(self, path: str, obj: Obj) -> Obj:
        location = locate(path).named(obj["metadata"]["name"])
        if location in self.objects:
            raise _error(409, "AlreadyExists", f"{location.resource} {location.name!r} already exists")
        self._uids += 1
        meta = {**obj["metadata"], "uid": obj["metadata"].get("uid") or f"uid-{self._uids}",
                "creationTimestamp": obj["metadata"].get("creationTimestamp") or timestamps.rfc3339(self.clock())}
        if location.namespace:
            meta["namespace"] = location.namespace
        if location.resource in GENERATIONS:
            meta["generation"] = 1
        return self._store(location, {**copy.deepcopy(obj), **typed(path, location), "metadata": meta})

    def update(self, path: str, change: Callable[[Obj], Obj]) -> Obj:
        """Replace the object at ``path`` with what ``change`` makes of a copy of it, status and all."""
        location = locate(path)
        current = self._existing(location)
        return self._store(location, _counted(location, current, change(copy.deepcopy(current))))

    def delete(self, path: str) -> None:
        """A user's delete: an object with finalizers is kept, marked deleted, until they are removed."""
        self._delete(locate(path), {})

    def remove(self, path: str) -> None:
        """The object gone at once, finalizers or not (a kubelet finishing a pod's deletion, a user's force)."""
        location = locate(path)
        self._existing(location)
        self._record(location, None)

    def drop_watches(self) -> None:
        """Every open watch ends, as when the server restarts; the watchers resume from where they were."""
        self._dropped += 1
        self._changed.set()

    def compact(self) -> None:
        """Forget the history up to now: a watch resumed from before gets 410 Gone and lists again."""
        self.compacted = self.revision

    def get_object(self, path: str) -> Obj | None:
        found = self.objects.get(locate(path))
        return copy.deepcopy(found) if found is not None else None

    def kept(self, path: str) -> list[Obj]:
        """The objects of a collection as stored, never to be changed: what a state of the history holds (nothing
        stored is ever changed in place, each write stores a new object)."""
        cached = self._kept.get(path)
        if cached is not None and cached[0] == self.revision:  # nothing stored since: the same objects
            return list(cached[1])
        location = locate(path)
        held = [(key.namespace, key.name, obj) for key, obj in self.objects.items() if location.holds(key)]
        found = [obj for _, _, obj in sorted(held, key=lambda entry: (entry[0], entry[1]))]  # as the API server lists them
        self._kept[path] = (self.revision, found)
        return list(found)

    # ------------------------------------------------ the operator's door (a KubeApi)
    async def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                      content_type: str = "", timeout: float = 0.0) -> Obj:  # noqa: ASYNC109 - AsyncKube's signature
        await asyncio.sleep(self.latency / 2)  # an answer never comes within the call: others run meanwhile, as over a socket
        fault = self.faults(method, path)
        if fault == Fault.KILLED and method == "GET":
            fault = Fault.REFUSED
        if fault == Fault.REFUSED:
            raise _error(500, "InternalError", f"simulated failure of {method} {path}")
        if fault == Fault.THROTTLED:
            raise _error(429, "TooManyRequests", "simulated throttling")
        if fault == Fault.TIMEOUT:
            raise Unreachable(f"simulated timeout of {method} {path}")
        if fault == Fault.KILLED:
            self.killed = True
            raise Unreachable(f"simulated timeout of {method} {path}, the operator killed")
        if fault == Fault.LATE:
            if method != "GET":
                asyncio.get_running_loop().call_later(self.late_seconds, self._late, method, path, dict(query or {}), copy.deepcopy(body),
                                                       self.revision)
            raise Unreachable(f"simulated timeout of {method} {path}, carried out later")
        answer = self._apply(method, path, query or {}, body)
        if self.latency:
            await asyncio.sleep(self.latency / 2)  # the way back: what was applied is news before the caller hears
        if fault == Fault.LOST:
            raise Unreachable(f"simulated loss of the answer to {method} {path}")
        if method == "GET" and not locate(path).name:
            self.listed.append((path, int(answer["metadata"]["resourceVersion"])))
            self.told[path] = int(answer["metadata"]["resourceVersion"])
        return answer

    def _apply(self, method: str, path: str, query: dict[str, str], body: Any, sent: int = 0) -> Obj:
        """Answer a request of the operator's now, recording a write in ``writes`` whether it was applied or refused
        (``sent``: the revision a write carried out late was sent at)."""
        try:
            answer = self._answer(method, path, query, body)
        except ApiError:
            if method != "GET":
                self.writes.append(Write(self.clock(), method, path, copy.deepcopy(body), False, self.revision, sent))
            raise
        if method != "GET":
            self.writes.append(Write(self.clock(), method, path, copy.deepcopy(body), True, self.revision, sent))
        return answer

    def _late(self, method: str, path: str, query: dict[str, str], body: Any, sent: int) -> None:
        """A write the caller gave up on (sent at revision ``sent``), carried out now against what is stored now:
        refused if its resourceVersion is stale by then, as any write."""
        with contextlib.suppress(ApiError):
            self._apply(method, path, query, body, sent)

    async def get(self, path: str) -> Obj | None:
        try:
            return await self.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def patch(self, path: str, body: Obj, content_type: str = "application/merge-patch+json") -> Obj:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def watch(self, path: str, query: dict[str, str], on_open: Callable[[], None] | None = None) -> AsyncIterator[Obj]:
        fault = self.faults("WATCH", path)
        if fault != Fault.NONE:
            raise Unreachable(f"simulated failure of the watch of {path}")
        location, since = locate(path), int(query.get("resourceVersion") or 0)
        if since < self.compacted:
            raise _error(410, "Expired", f"too old resource version: {since} ({self.compacted})")
        if on_open:
            on_open()
        loop = asyncio.get_running_loop()
        ends, dropped = loop.time() + float(query.get("timeoutSeconds") or 290), self._dropped
        while dropped == self._dropped and loop.time() < ends:
            if not self.silent:
                for change in self.history[self._first_after(since):]:
                    since = change.revision
                    if (event := self._event(change, location, query)) is not None:
                        yield event
                self.told[path] = since
            self._changed.clear()
            try:
                async with asyncio.timeout_at(ends):  # not wait_for, which on Python 3.11 may lose a cancellation
                    await self._changed.wait()
            except TimeoutError:
                return

    # ------------------------------------------------ answering
    def _answer(self, method: str, path: str, query: dict[str, str], body: Any) -> Obj:
        location = locate(path)
        if method == "GET":
            if location.name:
                return copy.deepcopy(self._existing(location))
            items = [copy.deepcopy(obj) for key, obj in sorted(self.objects.items()) if location.holds(key) and self._selected(obj, query)]
            return {"metadata": {"resourceVersion": str(self.revision)}, "items": items}
        if method == "POST" and location.subresource == "eviction":
            return self._evict(location.of_object(), body or {})
        if method == "POST":
            return self.create(path, body)
        if method == "PATCH":
            return self._patch(location, body)
        if method == "DELETE":
            return self._delete(location, body or {})
        raise _error(405, "MethodNotAllowed", f"{method} {path} is not simulated")

    def _existing(self, location: Location) -> Obj:
        found = self.objects.get(location.of_object())
        if found is None:
            raise _error(404, "NotFound", f'{location.resource} "{location.name}" not found', about={"kind": location.resource, "name": location.name})
        return found

    def _selected(self, obj: Obj, query: dict[str, str]) -> bool:
        return labels_match(query.get("labelSelector", ""), obj) and fields_match(query.get("fieldSelector", ""), obj)

    def _patch(self, location: Location, patch: Obj) -> Obj:
        current = copy.deepcopy(self._existing(location))  # what is stored, and the history, are never changed in place
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            raise _error(409, "Conflict", f"Operation cannot be fulfilled on {location.resource} {location.name!r}: the object has been modified")
        if location.subresource == "status":
            updated = {**current, "status": merged(current.get("status") or {}, patch.get("status") or {})}
        else:
            own = {k: v for k, v in patch.items() if not (k == "status" and location.resource in WITH_STATUS)}
            if "metadata" in own:
                own["metadata"] = {k: v for k, v in own["metadata"].items() if k != "resourceVersion"}
            updated = merged(current, own)
        updated = _counted(location, current, updated)
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get("finalizers"):
            self._record(location.of_object(), None)
            return updated
        return self._store(location.of_object(), updated)

    def _delete(self, location: Location, options: Obj) -> Obj:
        current = self._existing(location)
        preconditions = options.get("preconditions") or {}
        for field in ("uid", "resourceVersion"):
            if preconditions.get(field) and preconditions[field] != current["metadata"].get(field):
                raise _error(409, "Conflict", f"Precondition failed: {field} in precondition: {preconditions[field]}")
        grace = options.get("gracePeriodSeconds")
        if location.resource == "pods" and grace is None:
            grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        if current["metadata"].get("finalizers") or (location.resource == "pods" and grace):
            if current["metadata"].get("deletionTimestamp"):
                return current
            meta = {**current["metadata"], "deletionTimestamp": timestamps.rfc3339(self.clock()),
                    **({"deletionGracePeriodSeconds": grace} if location.resource == "pods" else {})}
            return self._store(location.of_object(), {**current, "metadata": meta})
        self._record(location.of_object(), None)
        return {"kind": "Status", "status": "Success"}

    def _evict(self, pod_location: Location, eviction: Obj) -> Obj:
        pod = self._existing(pod_location)
        covering = [b for key, b in sorted(self.objects.items()) if key.resource == "poddisruptionbudgets" and budgets.covers(b, pod)]
        refused = disruption.refusal(pod, covering)
        if refused is not None:
            code, message = refused
            causes = [{"type": "DisruptionBudget", "message": message}] if code == 429 else None
            raise _error(code, "TooManyRequests" if code == 429 else "InternalError", message, causes)
        if len(covering) == 1 and budgets.healthy(pod) and not disruption.terminal(pod):
            budget = covering[0]
            status = budget.get("status") or {}
            used = {**status, "disruptionsAllowed": status.get("disruptionsAllowed", 0) - 1,
                    "disruptedPods": {**(status.get("disruptedPods") or {}), pod["metadata"]["name"]: timestamps.rfc3339(self.clock())}}
            self._store(Location("poddisruptionbudgets", budget["metadata"]["namespace"], budget["metadata"]["name"]), {**budget, "status": used})
        return self._delete(pod_location, eviction.get("deleteOptions") or {})

    # ------------------------------------------------ storing and telling
    def _store(self, location: Location, obj: Obj) -> Obj:
        """Keep ``obj`` (the caller's to give: it is not changed after) and answer a copy of what is kept."""
        return copy.deepcopy(self._record(location, obj)) or {}

    def _record(self, location: Location, obj: Obj | None) -> Obj | None:
        """Store ``obj`` at ``location`` (None: remove what is there) under the next resourceVersion, and tell the watches."""
        self.revision += 1
        before = self.objects.get(location)
        if obj is None:
            self.objects.pop(location, None)
            if before is not None:  # a removal is sent with the object as it was, at the removal's resourceVersion
                before = {**before, "metadata": {**before["metadata"], "resourceVersion": str(self.revision)}}
                self.removed[location] = before
            after = None
        else:
            after = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.revision)}}
            self.objects[location] = after
        self.history.append(Change(self.revision, location, before, after))
        self._changed.set()
        return after

    def _first_after(self, revision: int) -> int:
        """The index in ``history`` of the first change after ``revision`` (the history is in revision order)."""
        low, high = 0, len(self.history)
        while low < high:
            middle = (low + high) // 2
            if self.history[middle].revision <= revision:
                low = middle + 1
            else:
                high = middle
        return low

    def _event(self, change: Change, watched: Location, query: dict[str, str]) -> Obj | None:
        """The event a watch of ``watched`` sends for ``change``: an object leaving its selection is DELETED for it, one
        entering it ADDED; None when it sees nothing of the change."""
        if not watched.holds(change.location):
            return None
        was = change.before is not None and change.after is not None and self._selected(change.before, query)
        now = change.after is not None and self._selected(change.after, query)
        if change.after is None:
            return {"type": "DELETED", "object": copy.deepcopy(change.before)} if change.before is not None and self._selected(change.before, query) else None
        if now:
            return {"type": "MODIFIED" if was else "ADDED", "object": copy.deepcopy(change.after)}
        if was:
            return {"type": "DELETED", "object": copy.deepcopy(change.after)}
        return None


def _spec(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _counted(location: Location, before: Obj, after: Obj) -> Obj:
    """``after`` with its generation counted up when what is not metadata or status changed (for kinds that count)."""
    if location.resource in GENERATIONS and _spec(after) != _spec(before):
        return {**after, "metadata": {**after["metadata"], "generation": before["metadata"].get("generation", 1) + 1}}
    return after

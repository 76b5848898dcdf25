"""Carries out what the pure decisions say: a drain step's :class:`plans.Plan` (the Lease, the node
patch, the events, the status, then what the status records: the hand-back, the Jobs, the pod removals) and a
deletion's :class:`handback.Handback`, with the postMaintenance Job and the condition a policy's hook records before it.

What each removal met comes back as an :class:`plans.Attempt` for the next plan. Retries of pods
no budget paces wait ``max(Retry-After, backoff)`` with jitter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from node_maintenance import api
from node_maintenance.api import timestamps
from node_maintenance.api.conversion import status_fields
from node_maintenance.api.paths import jobs_path, nm_path, node_path, pod_path
from node_maintenance.client.errors import ApiError, Conflict, KubeError, NotFound, ServerError, TooManyRequests, Unreachable
from node_maintenance.client.protocol import KubeApi
from node_maintenance.drain import status
from node_maintenance.drain.events import Event
from node_maintenance.drain.handback import Handback
from node_maintenance.drain.memory import Outcome
from node_maintenance.drain.plans import Action, Attempt, Plan, Removal
from node_maintenance.runtime import metrics, status_writes
from node_maintenance.runtime.leases import LeaseKeeper

# An accepted eviction is not sent again for this long, unless the pod's watch shows it still there.
ACCEPTED_SECONDS = 30.0
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 60.0
MAX_CONCURRENT_REMOVALS = 32

# What the log says when a maintenance posts an event of these reasons.
LOG_LINES = {"BeginMaintenance": "began maintenance", "SucceedMaintenance": "node drained"}

# (object, type, reason, message): posts a Kubernetes Event about a NodeMaintenance, a Node or a Pod.
EventSink = Callable[[dict[str, Any], str, str, str], None]
# Asked once the status recording a hand-back is stored, before the node is given back: why not yet ("": go on).
Readiness = Callable[[], Awaitable[str]]


def retry_delay(failures: int, retry_after: float, jitter: float) -> float:
    """Seconds before trying a refused or failed removal again: exponential, at least what the server asked.

    ``jitter`` in [0, 1) spreads retries of many pods over a fifth of the delay.
    """
    backoff = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2.0 ** max(0, failures - 1))
    return max(retry_after, backoff) * (1 + jitter / 5)


class Executor:
    """The one place a drain writes to the cluster: it does what a plan says, in the plan's order."""

    def __init__(self, kube: KubeApi, target: Mapping[str, Any], version: str, event: EventSink,
                 log: logging.LoggerAdapter[logging.Logger], lease: LeaseKeeper | None = None) -> None:
        """``target``: the NodeMaintenance this executor works for, as its events name it (``reference``); its node
        is the one it names."""
        self.kube = kube
        self.lease = lease
        self.target = reference(target)
        self.name: str = target["metadata"]["name"]
        self.node_name: str = target["spec"]["nodeName"]
        self.version = version
        self.event = event
        self.log = log
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_REMOVALS)

    async def run(self, plan: Plan, node: dict[str, Any] | None, attempts: Mapping[str, Attempt], stored: dict[str, Any],
                  version: str, ready: Readiness | None = None) -> Outcome:
        """Carry out ``plan`` whole (:func:`whole`) on ``node`` as last seen; ``stored`` is the status as last written
        (or as read): an unchanged status is not written again; ``version``: the NodeMaintenance's resourceVersion as
        read (runtime.status_writes). ``ready`` is asked before a hand-back (a policy's waitForHealthy records the node
        as recovering first)."""
        return await whole(self._run(plan, node, attempts, stored, version, ready))

    async def _run(self, plan: Plan, node: dict[str, Any] | None, attempts: Mapping[str, Attempt], stored: dict[str, Any],
                   version: str, ready: Readiness | None) -> Outcome:
        lease = await self.lease.write(plan.lease_claim) if self.lease and plan.lease_claim else None
        if lease is not None and lease.raced and plan.lease_claim is not None and plan.lease_claim.before_take:
            return Outcome(node_conflict=True, lease=lease)  # not taken on a claim that may not hold: planned again, the Lease read
        if plan.node_patch is not None:
            try:
                await self.kube.patch(node_path(self.node_name), plan.node_patch)
            except (Conflict, NotFound):
                return Outcome(node_conflict=True, lease=lease)
        self._post(plan.events, node, logged=True)
        # The status records what follows (the node given back, the workloads of the pods removed) before it is done: a
        # failed write, a restart or a new leader, which read only the stored status and the node, then lose nothing done.
        try:
            written = await self._write_status(stored, plan.status, version)
        except KubeError as error:  # nothing it was to record is done: the next step writes it again, then does it
            self.log.warning("writing the status failed; trying again before going on: %s", error)
            unanswered = isinstance(error, (Unreachable, ServerError))  # it may be applied: memory.shown tells once it shows
            return Outcome(lease=lease, status_failed=True, status_unanswered=unanswered, missing=await self._missing(error))
        if plan.handback is not None:
            try:
                if why := await ready() if ready else "":
                    self.log.warning("%s", why)
                    return Outcome(lease=lease, status_written=written, handback_held=why)
                if not await self._hand_back(plan.handback, node):
                    return Outcome(node_conflict=True, lease=lease, status_written=written)
            except KubeError as error:  # the stored status records the hand-back: the next step finishes it
                self.log.warning("giving the node back failed; trying again: %s", error)
                return Outcome(lease=lease, status_written=written, handback_held=f"giving the node back failed: {error}")
        refused = {job["metadata"]["name"]: await self.create_job(job) for job in plan.jobs}
        results = await asyncio.gather(*(self._remove(r, attempts.get(r.uid)) for r in plan.removals))
        if plan.drained_after is not None:
            metrics.DRAIN_SECONDS.observe(plan.drained_after)
        return Outcome(attempts=dict(zip((r.uid for r in plan.removals), results, strict=True)), lease=lease, refused_jobs=refused,
                       status_written=written)

    async def _missing(self, error: KubeError) -> bool:
        """Whether the NodeMaintenance is gone: its status write met a 404 naming it, and a read of the object itself
        finds none (a version whose status subresource is not enabled answers a 404 naming the object too; one of its
        name made again is not this drain's to give back). In doubt, it is not."""
        if not (isinstance(error, NotFound) and error.names(api.PLURAL, self.name)):
            return False
        try:
            return await self.kube.get(nm_path(self.name, version=self.version)) is None
        except KubeError:
            return False

    async def hand_back(self, handback: Handback, node: dict[str, Any] | None) -> bool:
        """Carry out a hand-back whole (:func:`whole`); False when the node is to be read again and decided on afresh:
        it changed under the patch, or the patch set the fence's mark."""
        return await whole(self._hand_back(handback, node))

    async def _hand_back(self, handback: Handback, node: dict[str, Any] | None) -> bool:
        if handback.fence is not None:
            try:
                await self.kube.patch(node_path(self.node_name), handback.fence)
            except (Conflict, NotFound):
                return False
            if handback.again:
                return False
        if handback.node_patch is not None:
            try:
                await self.kube.patch(node_path(self.node_name), handback.node_patch)
            except Conflict:
                return False
        if handback.release_lease and self.lease:
            await self.lease.release()
        if handback.node_patch is not None:
            self.log.info("removed maintenance")
        if handback.uncordons:
            self.log.info("uncordoned node")
        self._post(handback.events, node, logged=False)
        return True

    def _post(self, events: Iterable[Event], node: dict[str, Any] | None, *, logged: bool) -> None:
        """Post each event on the node, pod or NodeMaintenance it is about; ``logged``: log the latter too."""
        for event in events:
            about = _pod_ref(*event.pod) if event.pod else _node_ref(node) if event.on_node and node else self.target
            self.event(about, event.type, event.reason, event.message)
            if logged and not event.on_node and not event.pod:
                self._log(event)

    async def create_job(self, job: Mapping[str, Any]) -> str | None:
        """Create a hook Job; why the API refused it (None: created, or created meanwhile)."""
        try:
            await self.kube.request("POST", jobs_path(job["metadata"]["namespace"]), body=job)
        except Conflict:  # created meanwhile; the watch brings it
            return None
        except (Unreachable, ServerError) as error:  # no verdict on the template: the gate asks for the Job again
            self.log.warning("creating hook Job %s failed; trying again: %s", job["metadata"]["name"], error)
        except ApiError as error:  # a template the API refuses: the gate says which field to fix
            return str(error)
        return None

    def _log(self, event: Event) -> None:
        if event.reason in (Action.DELETE_PODS, Action.FORCE_DELETE_PODS):  # an escalation: the drain goes on
            self.log.warning(event.message)
        elif event.type == "Warning":
            self.log.warning("maintenance failed: %s", event.message)
        else:
            self.log.info(LOG_LINES.get(event.reason, event.message))

    async def _remove(self, removal: Removal, previous: Attempt | None) -> Attempt | None:
        preconditions = {"uid": removal.uid}  # never act on a replacement that reused the name
        options: dict[str, Any] = {"preconditions": preconditions}
        if removal.grace is not None:
            options["gracePeriodSeconds"] = removal.grace
        path = pod_path(removal.namespace, removal.name)
        failures = (previous.failures if previous else 0) + 1
        now = timestamps.now().timestamp()
        try:
            async with self._slots:
                if removal.delete:
                    await self.kube.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions", **options})
                else:
                    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": removal.name, "namespace": removal.namespace}, "deleteOptions": options}
                    await self.kube.request("POST", path + "/eviction", body=eviction)
        except (NotFound, Conflict):
            return None  # gone, or replaced: the pod watch tells
        except TooManyRequests as error:
            metrics.EVICTIONS.labels(result="blocked").inc()
            if removal.budget and error.by_budget:  # the budget's next change says when to try again
                return Attempt(now, refused_by=((removal.budget, removal.budget_version),), failures=failures)
            # The server's limits (API Priority and Fairness) or a webhook: tried again, as kubectl does.
            return Attempt(now + retry_delay(failures, error.retry_after, random.random()),
                           error=f"eviction refused for now: {error.message or error.reason}", failures=failures)
        except KubeError as error:
            metrics.EVICTIONS.labels(result="error").inc()
            return Attempt(now + retry_delay(failures, 0, random.random()), error=f"removal failed: {error}", failures=failures)
        metrics.EVICTIONS.labels(result="deleted" if removal.delete else "evicted").inc()
        if removal.escalation:
            metrics.ESCALATIONS.labels(action=removal.escalation).inc()
        return Attempt(now + ACCEPTED_SECONDS, accepted=True)

    async def note(self, fields: dict[str, Any], version: str) -> None:
        """Patch these status fields of a NodeMaintenance whose drain has ended (a hook's condition at its deletion), as
        of its resourceVersion ``version`` (``status_writes``: a note of ours carried out late cannot put back an older
        condition); fields the API refuses are let go, the hand-back goes on."""
        with contextlib.suppress(ApiError):
            await status_writes.write_status(self.kube, nm_path(self.name, version=self.version), version, fields)

    async def _write_status(self, stored: dict[str, Any], new: dict[str, Any], version: str) -> bool:
        """Patch the status when it changed (True: patched); only the fields the working version holds are written."""
        held = status_fields(self.version)
        new = {key: value for key, value in new.items() if key in held}
        previous = {key: value for key, value in stored.items() if key in held}
        if status.same(previous, new):
            return False
        await status_writes.write_status(self.kube, nm_path(self.name, version=self.version), version, new)
        return True


T = TypeVar("T")


async def whole(carrying_out: Coroutine[Any, Any, T]) -> T:
    """Carry out a plan whole. Stopped meanwhile (a drain's NodeMaintenance deleted, the operator shutting down), the
    caller ends only once the writes already sent have been answered: a cancelled request may still be applied by the
    server, and what reads the cluster next (the handback reads the node once the drain has ended) must see what they
    did (a node taken just then is given back)."""
    task = asyncio.ensure_future(carrying_out)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


def reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What an event names of the object it is about: its kind, version, name and uid."""
    meta = obj["metadata"]
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {key: meta[key] for key in ("name", "namespace", "uid") if key in meta}}


def _pod_ref(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name, "uid": uid}}


def _node_ref(node: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}}

"""kopf handlers: thin glue from NodeMaintenance events to the drain ``Engine`` and the hand-back.

Handlers are registered per API version at run time (:func:`registry`): the entry point picks the
version the installed CRD serves and builds a registry for it. What they share comes in kopf's
``memo`` (a :class:`Memo`), so handlers hold no globals.

One daemon per NodeMaintenance runs its drain ``Engine`` until the object is deleted; every change
of the object wakes the engine; the deletion handler (which makes kopf keep our finalizer on every
object) gives the node back, and so does the daemon of an object gone without that deletion. An index of NodeMaintenance names, which kopf fills before any handler
runs, tells an engine whether the holder its node names still exists.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from typing import Any, cast

import kopf

from node_maintenance import api
from node_maintenance.client.async_http import MAX_REQUEST_CONNECTIONS, client_session
from node_maintenance.client.errors import KubeError
from node_maintenance.runtime import giving_back
from node_maintenance.runtime.engine import Engine, Shared

FINALIZER = f"{api.GROUP}/finalizer"
# How often a new NodeMaintenance's daemon looks whether kopf's finalizer is on it yet.
FINALIZER_POLL_SECONDS = 0.2
# How long kopf waits for a daemon to end once its NodeMaintenance is deleted, before it looks again later.
DAEMON_EXIT_SECONDS = 0.1
# How soon a hand-back of a NodeMaintenance gone without its deletion is tried again after an error with no delay of its own.
RETRY_SECONDS = 5.0


@dataclasses.dataclass
class Running:
    """One NodeMaintenance's engine and the task running it."""

    engine: Engine
    task: asyncio.Task[None]


@dataclasses.dataclass
class Memo:
    """What kopf hands every handler (a shallow copy per object: ``engines`` is one dict for all)."""

    shared: Shared
    engines: dict[str, Running]


class NoEssence(kopf.DiffBaseStorage):
    """No NodeMaintenance has an essence for kopf to compare: no handler of ours tells a creation from an update or
    one update from another (every change wakes the engine, which reads the object whole). kopf's own diff base, kept
    in an annotation, cost every NodeMaintenance a patch of its own, and the status write that raced it a conflict:
    its last handled spec is neither built, nor read, nor written."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return cast(kopf.BodyEssence, {})

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence:
        return cast(kopf.BodyEssence, {})

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def post_event(obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
    kopf.event(cast(kopf.Body, obj), type=type_, reason=reason, message=message[:1024])  # kopf reads it as a mapping


def _logger(body: kopf.Body) -> logging.LoggerAdapter[logging.Logger]:
    return logging.LoggerAdapter(
        logging.getLogger("node_maintenance"),
        {"nodeMaintenance": body["metadata"]["name"], "node": body.get("spec", {}).get("nodeName", "")},
    )


async def login(memo: Memo, **_: Any) -> kopf.AiohttpSession:
    """kopf talks to the API as we do: our credentials, TLS, proxy, impersonation and User-Agent in a session
    of ours, which writes nothing once this replica no longer leads. kopf logs in again when the credential expires
    or the server refuses it."""
    kube = memo.shared.kube
    credentials = kube.credentials
    # Bounded like our own pool: a thousand NodeMaintenances created at once had kopf open a connection for each
    # finalizer it adds (its one watch holds one of them for good).
    return kopf.AiohttpSession(server=credentials.server, expiration=credentials.expires(),
                               aiohttp_session=client_session(credentials, MAX_REQUEST_CONNECTIONS, credentials.identity(), kube.may_write))


def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=api.GROUP)
    settings.persistence.diffbase_storage = NoEssence()
    settings.scanning.disabled = True  # we serve one known resource; no cluster-wide CRD/namespace watches
    settings.posting.level = logging.WARNING  # our own events say what happened; kopf's would duplicate them
    settings.watching.server_timeout = 300
    # A deleted NodeMaintenance's daemon ends within milliseconds (its engine cancelled, its watches closed), more than
    # kopf's default ten loop cycles: kopf then cancelled it and looked again 5 s later through a patch of the object,
    # which held each slot of a rolling maintenance 5 s longer than its drain.
    settings.background.instant_exit_timeout = DAEMON_EXIT_SECONDS


def names(name: str, **_: Any) -> dict[str, bool]:
    """The index ``names``: every NodeMaintenance by name."""
    return {name: True}


async def maintain(body: kopf.Body, stopped: kopf.DaemonStopped, memo: Memo, names: kopf.Index[str, bool], **_: Any) -> None:
    """Drive the drain until kopf stops the daemon (the object is deleted, or the operator stops); for an object gone
    without the deletion our finalizer guards, which kopf neither stops a daemon for nor hands to ``remove``, until its
    node is given back."""
    name = body["metadata"]["name"]
    # kopf starts daemons before its finalizer is on the object: a node taken then would stay cordoned if the
    # NodeMaintenance were deleted before the finalizer landed, since nothing would give it back. Take nothing till then.
    while FINALIZER not in (body["metadata"].get("finalizers") or []):
        if await stopped.wait(FINALIZER_POLL_SECONDS):
            return
    log = _logger(body)
    # kopf keeps `body` current; the engine reads it through the conversion, which copies it.
    engine = Engine(memo.shared, lambda: dict(body), log, exists=lambda holder: holder in names)
    memo.engines[name] = running = Running(engine, asyncio.create_task(engine.run()))
    stopping = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait((running.task, stopping), return_when=asyncio.FIRST_COMPLETED)
        if engine.gone:  # gone without our deletion: nothing else gives its node back
            log.warning("the NodeMaintenance is gone without its deletion being seen; its node is given back")
            await _given_back(body, memo, stopped)
        elif running.task.done():  # an error the engine could not handle: raised, and kopf starts the daemon again
            running.task.result()
        else:  # the daemon lives as long as its object: kopf stops it
            await stopping
    finally:
        stopping.cancel()
        await stop_drain(memo, name)


async def _given_back(body: kopf.Body, memo: Memo, stopped: kopf.DaemonStopped) -> None:
    """Give the node back as the deletion handler does, trying again as kopf would, until it is done or the daemon stops."""
    while True:
        try:
            await remove(body, memo)
            return
        except kopf.TemporaryError as error:
            delay = error.delay or RETRY_SECONDS
        except KubeError as error:
            _logger(body).warning("giving the node back failed; trying again: %s", error)
            delay = RETRY_SECONDS
        if await stopped.wait(delay):
            return


async def stop_drain(memo: Memo, name: str) -> None:
    """End the NodeMaintenance's drain, and return only once its engine has ended. The daemon's end and the deletion
    handler both call it, kopf running them side by side: whichever comes second waits as long as the first, so a
    take still in flight when the drain was cancelled lands before the node is read to be given back (the soak found a
    node left held by a deleted NodeMaintenance when the second returned at once)."""
    running = memo.engines.get(name)
    if running is None:
        return
    running.task.cancel()
    await asyncio.gather(running.task, return_exceptions=True)
    if memo.engines.get(name) is running:
        del memo.engines[name]


async def changed(body: kopf.Body, memo: Memo, **_: Any) -> None:
    """Any change of a NodeMaintenance (a new spec.drain, say) makes its engine plan again."""
    running = memo.engines.get(body["metadata"]["name"])
    if running is not None:
        running.engine.wake()


async def remove(body: kopf.Body, memo: Memo, **_: Any) -> None:
    # The drain stops first: it must not take the node again once it is given back.
    await stop_drain(memo, body["metadata"]["name"])
    shared = memo.shared
    given = copy.deepcopy(dict(body))
    executor = giving_back.executor(shared.kube, given, shared.version, shared.event, _logger(body), shared.lease_namespace)
    if shared.policies:  # a policy's postMaintenance Job runs before the node is given back
        await giving_back.before(shared.policies, given, executor)
    await giving_back.end(shared.kube, given, executor, shared.active)


def registry(version: str) -> kopf.OperatorRegistry:
    """The handlers for NodeMaintenances served as ``version``."""
    handlers = kopf.OperatorRegistry()
    kopf.on.login(registry=handlers)(login)
    kopf.on.startup(registry=handlers)(configure)
    kopf.index(api.GROUP, version, api.PLURAL, registry=handlers)(names)
    kopf.daemon(api.GROUP, version, api.PLURAL, cancellation_timeout=5.0, registry=handlers)(maintain)  # type: ignore[arg-type]  # kopf's protocol lists no index arguments
    kopf.on.event(api.GROUP, version, api.PLURAL, registry=handlers)(changed)
    kopf.on.delete(api.GROUP, version, api.PLURAL, registry=handlers)(remove)
    return handlers

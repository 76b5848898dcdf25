"""kopf handlers: thin glue from NodeMaintenance events to their engines (``maintenances``) and the hand-back.

Handlers are registered per API version at run time (:func:`registry`): the entry point picks the
version the installed CRD serves and builds a registry for it. What they share comes in kopf's
``memo`` (a :class:`Memo`), so handlers hold no globals.

kopf watches the NodeMaintenances and keeps our finalizer on each (the deletion handler makes it); every event goes to
``Maintenances``, which runs an engine for each maintenance worked on and none for one waiting in line (kopf's
daemons would hold a task, its memo and its body for each of a fleet's thousands in line). The deletion handler gives
the node back. No kopf index is registered: kopf would hold a toggle per NodeMaintenance and wake every waiting worker
at each (``Maintenances`` keeps the names itself).
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
from typing import Any, cast

import kopf

from node_maintenance import api
from node_maintenance.client.async_http import MAX_REQUEST_CONNECTIONS, client_session
from node_maintenance.runtime import giving_back, maintenances
from node_maintenance.runtime.engine import Shared
from node_maintenance.runtime.maintenances import Maintenances


@dataclasses.dataclass
class Memo:
    """What kopf hands every handler (a shallow copy per object: ``maintenances`` is one for all)."""

    shared: Shared
    maintenances: Maintenances


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
    settings.persistence.finalizer = maintenances.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=api.GROUP)
    settings.persistence.diffbase_storage = NoEssence()
    settings.scanning.disabled = True  # we serve one known resource; no cluster-wide CRD/namespace watches
    settings.posting.level = logging.WARNING  # our own events say what happened; kopf's would duplicate them
    settings.watching.server_timeout = 300


async def changed(body: kopf.Body, memo: Memo, type: str | None = None, **_: Any) -> None:
    """Every change of a NodeMaintenance (a new spec.drain, say) reaches its engine, or starts one."""
    if memo.maintenances.context is None:  # an engine started when the policies tell posts events as kopf's handlers do
        memo.maintenances.context = contextvars.copy_context()
    memo.maintenances.seen(dict(body), deleted=type == "DELETED")


async def remove(body: kopf.Body, memo: Memo, **_: Any) -> None:
    """Give the node back; kopf calls again after the delay a policy's hook or waitForHealthy asks."""
    try:
        await memo.maintenances.give_back(dict(body))
    except giving_back.Later as later:
        raise kopf.TemporaryError(str(later), delay=later.delay) from later


def registry(version: str) -> kopf.OperatorRegistry:
    """The handlers for NodeMaintenances served as ``version``."""
    handlers = kopf.OperatorRegistry()
    kopf.on.login(registry=handlers)(login)
    kopf.on.startup(registry=handlers)(configure)
    kopf.on.event(api.GROUP, version, api.PLURAL, registry=handlers)(changed)
    kopf.on.delete(api.GROUP, version, api.PLURAL, registry=handlers)(remove)
    return handlers

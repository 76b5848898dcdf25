"""kopf handlers: thin glue from NodeMaintenance events to ``maintenance``.

Handlers are registered per API version at run time (:func:`registry`): the entry point picks the
version the installed CRD serves and builds a registry for it. The API access and that version come
in kopf's ``memo``, so handlers hold no globals.

One daemon per NodeMaintenance runs its drain ``Engine`` until the object is deleted; every change
of the object wakes the engine; the deletion handler (which makes kopf keep our finalizer on every
object) gives the node back.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import kopf

from node_maintenance import api
from node_maintenance.runtime import handback as maintenance
from node_maintenance.runtime.engine import Engine

FINALIZER = f"{api.GROUP}/finalizer"
# How often a new NodeMaintenance's daemon looks whether kopf's finalizer is on it yet.
FINALIZER_POLL_SECONDS = 0.2


def _event(obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
    kopf.event(obj, type=type_, reason=reason, message=message[:1024])


def _logger(body: kopf.Body) -> logging.LoggerAdapter:
    return logging.LoggerAdapter(
        logging.getLogger("node_maintenance"),
        {"nodeMaintenance": body["metadata"]["name"], "node": body.get("spec", {}).get("nodeName", "")},
    )


def login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
    """kopf talks to the API with our own credentials (its helper for this would load the official client)."""
    c = memo.akube.credentials
    token = c.bearer()
    return kopf.ConnectionInfo(server=c.server, ca_path=c.ca_file, ca_data=c.ca_data, insecure=c.insecure,
                               scheme="Bearer" if token else None, token=token, certificate_path=c.cert_file,
                               certificate_data=c.cert_data, private_key_path=c.key_file, private_key_data=c.key_data)


def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=api.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=api.GROUP, key="last-handled-configuration")
    settings.scanning.disabled = True  # we serve one known resource; no cluster-wide CRD/namespace watches
    settings.posting.level = logging.WARNING  # our own events say what happened; kopf's would duplicate them
    settings.watching.server_timeout = 300


async def maintain(body: kopf.Body, stopped: kopf.DaemonStopped, memo: kopf.Memo, **_: Any) -> None:
    """Drive the drain until kopf stops the daemon (the object is deleted, or the operator stops)."""
    name = body["metadata"]["name"]
    # kopf starts daemons before its finalizer is on the object: a node taken then would stay cordoned if the
    # NodeMaintenance were deleted before the finalizer landed, since nothing would give it back. Take nothing till then.
    while FINALIZER not in (body["metadata"].get("finalizers") or []):
        if await stopped.wait(FINALIZER_POLL_SECONDS):
            return
    # kopf keeps `body` current; the engine reads it through the conversion, which copies it.
    engine = Engine(memo.akube, memo.budgets, memo.active, lambda: dict(body), memo.version, _event, _logger(body),
                    policies=memo.policies, lease_namespace=memo.lease_namespace)
    running = asyncio.create_task(engine.run())
    memo.engines[name] = (engine, running)
    try:
        await stopped.wait()
    finally:
        await _stop(memo, name)


async def _stop(memo: kopf.Memo, name: str) -> None:
    engine = memo.engines.pop(name, None)
    if engine is not None:
        engine[1].cancel()
        await asyncio.gather(engine[1], return_exceptions=True)


async def changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Any change of a NodeMaintenance (a new spec.drain, say) makes its engine plan again."""
    engine = memo.engines.get(body["metadata"]["name"])
    if engine is not None:
        engine[0].wake()


async def remove(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    # The drain stops first: it must not take the node again once it is given back.
    await _stop(memo, body["metadata"]["name"])
    if memo.policies:  # a policy's postMaintenance Job runs before the node is given back
        await memo.policies.before_handback(dict(body), memo.version)
    await maintenance.end(memo.akube, copy.deepcopy(dict(body)), _event, _logger(body), memo.active, memo.lease_namespace)


def registry(version: str) -> kopf.OperatorRegistry:
    """The handlers for NodeMaintenances served as ``version``."""
    handlers = kopf.OperatorRegistry()
    kopf.on.login(registry=handlers)(login)
    kopf.on.startup(registry=handlers)(configure)
    kopf.daemon(api.GROUP, version, api.PLURAL, cancellation_timeout=5.0, registry=handlers)(maintain)
    kopf.on.event(api.GROUP, version, api.PLURAL, registry=handlers)(changed)
    kopf.on.delete(api.GROUP, version, api.PLURAL, registry=handlers)(remove)
    return handlers

"""The HTTPS server for the CRD conversion webhook and the validating admission webhooks (of
NodeMaintenances and of NodeMaintenancePolicies).

Every request gets an answer in the review's own format: a malformed review is a failed review
with a message, never a 5xx or a dropped connection, because the apiserver turns those into
opaque errors for every client of the resource.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from node_maintenance.api import CONVERT_PATH, VALIDATE_PATH, VALIDATE_POLICY_PATH
from node_maintenance.api.conversion import ConversionError, converted, version_of
from node_maintenance.client.errors import TooManyRequests
from node_maintenance.client.http import Kube
from node_maintenance.policy import decide as pol
from node_maintenance.webhooks import admission
from node_maintenance.webhooks.certs import ReloadingTLS
from node_maintenance.webhooks.dropped_fields import DroppedFields

log = logging.getLogger(__name__)
MAX_REVIEW_BYTES = 8 * 1024 * 1024
# Reads of an admission review answered 429 are made this often at most, with these pauses between (a review has 10 s).
FACTS_TRIES = 3
FACTS_RETRY_MIN_SECONDS, FACTS_RETRY_MAX_SECONDS = 0.5, 2.0


@dataclass(frozen=True)
class ConversionReply:
    """The answer to a ConversionReview, and each object whose parked fields the conversion dropped, with why."""

    review: dict[str, Any]
    dropped: tuple[tuple[dict[str, Any], tuple[str, ...]], ...] = ()


def conversion_reply(review: Any) -> ConversionReply:
    """Answer a ConversionReview (apiextensions.k8s.io/v1); pure, so it is tested without a server."""
    dropped: tuple[tuple[dict[str, Any], tuple[str, ...]], ...] = ()
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid", "") if isinstance(request, dict) else ""
    response: dict[str, Any] = {"uid": uid if isinstance(uid, str) else ""}
    try:
        if not isinstance(request, dict):
            raise ConversionError("the body must be a ConversionReview with a request object")
        desired = request.get("desiredAPIVersion")
        objects = request.get("objects")
        if not isinstance(desired, str) or not isinstance(objects, list):
            raise ConversionError("request.desiredAPIVersion (string) and request.objects (list) are required")
        version_of(desired)  # refuse an unknown target even when there is nothing to convert
        results = [converted(obj, desired) for obj in objects]
        response["convertedObjects"] = [result.obj for result in results]
        response["result"] = {"status": "Success"}
        dropped = tuple((obj, result.dropped) for obj, result in zip(objects, results, strict=True) if result.dropped)
    except ConversionError as error:
        response["result"] = {"status": "Failure", "message": str(error)}
    except RecursionError:  # no NodeMaintenance is nested this deep
        response["result"] = {"status": "Failure", "message": "request.objects: an object is nested too deeply to be a NodeMaintenance; send NodeMaintenance objects"}
    except Exception as error:  # a bug must still answer as a failed conversion, not as a 5xx
        log.exception("conversion failed unexpectedly")
        response["result"] = {"status": "Failure", "message": f"conversion failed: {error!r}"}
    return ConversionReply(review={"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}, dropped=dropped)


def admission_response(uid: str, reason: str | None) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": reason is None}
    if reason is not None:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": reason}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


NOT_A_REVIEW = "the body must be an AdmissionReview with request.object"


def _admission_request(review: Any) -> tuple[str, dict[str, Any] | None]:
    """The review's uid and request; None for a body that is no AdmissionReview with request.object."""
    req = review.get("request") if isinstance(review, dict) else None
    if not isinstance(req, dict):
        return "", None
    uid = str(req.get("uid", ""))
    return uid, req if isinstance(req.get("object"), dict) else None


def policy_admission_response(review: Any) -> dict[str, Any]:
    """Answer an AdmissionReview of a NodeMaintenancePolicy being created or updated; pure, so it is tested without a server."""
    uid, req = _admission_request(review)
    if req is None:
        return admission_response(uid, NOT_A_REVIEW)
    if req.get("operation") not in ("CREATE", "UPDATE"):
        return admission_response(uid, None)
    reason = pol.admission_refusal(req["object"])
    if reason:
        log.info("refused NodeMaintenancePolicy", extra={"reason": reason})
    return admission_response(uid, reason)


async def _facts(kube: Kube, obj: dict[str, Any]) -> admission.Facts:
    """What the admission rules read. A read the API server asks to be made again later (a 429, as while a
    CRD's storage re-initialises after an upgrade) is made again after its Retry-After, as client-go's clients
    do, within the review's 10 s; in doubt after that, the review is refused and says to try again."""
    for attempt in range(FACTS_TRIES):
        try:
            return await asyncio.to_thread(admission.gather_facts, kube, obj)
        except TooManyRequests as busy:
            if attempt == FACTS_TRIES - 1:
                raise
            await asyncio.sleep(min(max(busy.retry_after, FACTS_RETRY_MIN_SECONDS), FACTS_RETRY_MAX_SECONDS))
    raise AssertionError("unreachable: the last attempt returns or raises")


async def _read_json(request: web.Request) -> Any:
    body = await _read_body(request)
    try:
        return orjson.loads(body)
    except ValueError:  # orjson's decode errors, invalid UTF-8 included, are ValueErrors
        return None


async def _read_body(request: web.Request) -> bytes:
    """The body as sent; one that cannot be decoded (a broken Content-Encoding) is the client's error."""
    try:
        return await request.read()
    except web.RequestPayloadError as error:
        raise web.HTTPBadRequest(text=f"the request body could not be read ({error.__cause__ or error}); "
                                 "send the review as JSON, without a Content-Encoding or with a valid one") from None


def _json(answer: dict[str, Any]) -> web.Response:
    """orjson: decoding and encoding took more than half of a review of many objects with the json module."""
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


def _app(kube: Kube) -> web.Application:
    dropped_fields = DroppedFields(kube)

    async def convert_handler(request: web.Request) -> web.Response:
        reply = conversion_reply(await _read_json(request))
        for obj, dropped in reply.dropped:
            dropped_fields.tell(obj, dropped)
        answer = reply.review
        try:
            return _json(answer)
        except orjson.JSONEncodeError as error:  # deeper than orjson encodes (255 levels), which no NodeMaintenance is
            answer["response"].pop("convertedObjects", None)
            answer["response"]["result"] = {"status": "Failure", "message": f"request.objects: the converted objects cannot be "
                                                                            f"encoded ({error}); send NodeMaintenance objects"}
            return _json(answer)

    async def validate_handler(request: web.Request) -> web.Response:
        uid, req = _admission_request(await _read_json(request))
        if req is None:
            return _json(admission_response(uid, NOT_A_REVIEW))
        if req.get("operation") != "CREATE":
            return _json(admission_response(uid, None))
        obj = req["object"]
        refused = admission.unreadable(obj)
        if refused:
            return _json(admission_response(uid, refused))
        try:
            facts = await _facts(kube, obj)
        except Exception as error:  # the apiserver must get an answer; failurePolicy Fail would refuse anyway
            log.warning("admission check could not read the cluster: %s", error)
            return _json(admission_response(uid, f"could not check the node: {error}; try again"))
        try:
            reason = admission.deny_reason(obj, facts)
        except Exception as error:  # a bug: an answer still, or every later CREATE would get a 500 too
            log.exception("admission check failed unexpectedly")
            reason = f"could not check the node: {error!r}; try again, and report it if it persists"
        if reason:
            log.info("refused NodeMaintenance", extra={"nodeMaintenance": obj.get("metadata", {}).get("name"), "reason": reason})
        return _json(admission_response(uid, reason))

    async def validate_policy_handler(request: web.Request) -> web.Response:
        return _json(policy_admission_response(await _read_json(request)))

    app = web.Application(client_max_size=MAX_REVIEW_BYTES)
    app.router.add_post(CONVERT_PATH, convert_handler)
    app.router.add_post(VALIDATE_PATH, validate_handler)
    app.router.add_post(VALIDATE_POLICY_PATH, validate_policy_handler)
    return app


async def start_webhook_server(*, host: str, port: int, cert_dir: Path, kube: Kube) -> web.AppRunner:
    """Serve the webhooks over TLS on ``host:port``; the certificate follows rotations of the files."""
    tls = ReloadingTLS(cert_dir)
    app = _app(kube)
    watcher = asyncio.get_running_loop().create_task(tls.watch())

    async def stop_watching(_: web.Application) -> None:
        watcher.cancel()

    app.on_cleanup.append(stop_watching)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=tls.context).start()
    log.info("webhooks serving", extra={"address": f"{host}:{port}"})
    return runner

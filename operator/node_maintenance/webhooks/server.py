"""The HTTPS server for the CRD conversion webhook and the validating admission webhooks (of
NodeMaintenances and of NodeMaintenancePolicies).

Every request gets an answer in the review's own format: a malformed review is a failed review
with a message, never a 5xx or a dropped connection, because the apiserver turns those into
opaque errors for every client of the resource. Only a body beyond the limits of
:mod:`node_maintenance.webhooks.intake` (too large, too slow, too many at once) is refused with an
HTTP status. Reviews are decoded, decided and encoded in a thread, so that the event loop keeps
going meanwhile: it also renews the leader's Lease and answers the health probes.
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
from node_maintenance.client.protocol import BlockingKubeApi
from node_maintenance.policy import authority, refusals
from node_maintenance.webhooks import admission, authorization, certs
from node_maintenance.webhooks.dropped_fields import DroppedFields
from node_maintenance.webhooks.intake import MAX_REVIEW_BYTES, Intake

log = logging.getLogger(__name__)
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


def policy_admission_response(review: Any, operator_namespace: str) -> dict[str, Any]:
    """Answer an AdmissionReview of a NodeMaintenancePolicy being created or updated; pure, so it is tested without a server.
    ``operator_namespace``: the operator's own, where no hook Job may run."""
    uid, req = _admission_request(review)
    if req is None:
        return admission_response(uid, NOT_A_REVIEW)
    if req.get("operation") not in ("CREATE", "UPDATE"):
        return admission_response(uid, None)
    old = req.get("oldObject") if req.get("operation") == "UPDATE" else None
    reason = refusals.admission_refusal(req["object"], operator_namespace, old if isinstance(old, dict) else None)
    if reason:
        log.info("refused NodeMaintenancePolicy", extra={"reason": reason})
    return admission_response(uid, reason)


async def read_facts(kube: BlockingKubeApi, obj: dict[str, Any], *, policies: bool = False) -> admission.Facts:
    """What the admission rules read. A read the API server asks to be made again later (a 429, as while a
    CRD's storage re-initialises after an upgrade) is made again after its Retry-After, as client-go's clients
    do, within the review's 10 s; in doubt after that, the review is refused and says to try again. ``policies``: the
    policies that select the node are read too, for what a maintenance inherits of their drain defaults."""
    for attempt in range(FACTS_TRIES):
        try:
            return await asyncio.to_thread(admission.gather_facts, kube, obj, policies=policies)
        except TooManyRequests as busy:
            if attempt == FACTS_TRIES - 1:
                raise
            await asyncio.sleep(min(max(busy.retry_after, FACTS_RETRY_MIN_SECONDS), FACTS_RETRY_MAX_SECONDS))
    raise AssertionError("unreachable: the last attempt returns or raises")


def _decoded(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except ValueError:  # orjson's decode errors, invalid UTF-8 and nesting too deep included, are ValueErrors
        return None


def _converted(body: bytes) -> tuple[ConversionReply, bytes]:
    """A ConversionReview answered: decoded, converted and encoded (all in a worker thread)."""
    reply = conversion_reply(_decoded(body))
    try:
        return reply, orjson.dumps(reply.review)
    except orjson.JSONEncodeError as error:  # deeper than orjson encodes (255 levels), which no NodeMaintenance is
        answer = reply.review
        answer["response"].pop("convertedObjects", None)
        answer["response"]["result"] = {"status": "Failure", "message": f"request.objects: the converted objects cannot be "
                                                                        f"encoded ({error}); send NodeMaintenance objects"}
        return ConversionReply(review=answer), orjson.dumps(answer)


def _admission_request_of(body: bytes) -> tuple[str, dict[str, Any] | None]:
    return _admission_request(_decoded(body))


def _json(encoded: bytes) -> web.Response:
    """orjson: decoding and encoding took more than half of a review of many objects with the json module."""
    return web.Response(body=encoded, content_type="application/json")


def _app(kube: BlockingKubeApi, authorize: bool, namespace: str) -> web.Application:
    dropped_fields = DroppedFields(kube)
    intake = Intake()

    async def convert_handler(request: web.Request) -> web.Response:
        async with intake.body(request) as body:
            reply, encoded = await asyncio.to_thread(_converted, body)
        for obj, dropped in reply.dropped:
            dropped_fields.tell(obj, dropped)
        return _json(encoded)

    async def validate_handler(request: web.Request) -> web.Response:
        async with intake.body(request) as body:
            uid, req = await asyncio.to_thread(_admission_request_of, body)
        return _json(orjson.dumps(await _nm_admission(kube, uid, req, authorize)))

    async def validate_policy_handler(request: web.Request) -> web.Response:
        async with intake.body(request) as body:
            uid, req = await asyncio.to_thread(_admission_request_of, body)
        return _json(orjson.dumps(await _policy_admission(kube, uid, req, authorize, namespace)))

    app = web.Application(client_max_size=MAX_REVIEW_BYTES)
    app.router.add_post(CONVERT_PATH, convert_handler)
    app.router.add_post(VALIDATE_PATH, validate_handler)
    app.router.add_post(VALIDATE_POLICY_PATH, validate_policy_handler)
    return app


async def _nm_admission(kube: BlockingKubeApi, uid: str, req: dict[str, Any] | None, authorize: bool) -> dict[str, Any]:
    """Answer an AdmissionReview of a NodeMaintenance: the rules on a new one, on what they read of the cluster, and
    (``authorize``) whether its author may do what it asks of the operator, on a new one and on a changed spec."""
    if req is None:
        return admission_response(uid, NOT_A_REVIEW)
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return admission_response(uid, None)
    obj = req["object"]
    refused = admission.unreadable(obj)
    if refused:
        return admission_response(uid, refused)
    creating = operation == "CREATE"
    asks = authorize and authority.changed(obj, None if creating else req.get("oldObject"))
    if not creating and not asks:
        return admission_response(uid, None)
    try:
        facts = await read_facts(kube, obj, policies=asks)
    except Exception as error:  # the apiserver must get an answer; failurePolicy Fail would refuse anyway
        log.warning("admission check could not read the cluster: %s", error)
        return admission_response(uid, f"could not check the node: {error}; try again")
    try:
        reason = admission.deny_reason(obj, facts) if creating else None
    except Exception as error:  # a bug: an answer still, or every later CREATE would get a 500 too
        log.exception("admission check failed unexpectedly")
        reason = f"could not check the node: {error!r}; try again, and report it if it persists"
    if reason is None and asks:
        needs = authority.maintenance_needs(obj, admission.node_name_of(obj), facts.policy_drains)
        reason = await _unauthorized(kube, req, f"NodeMaintenance {(obj.get('metadata') or {}).get('name', '')}", needs)
    if reason:
        log.info("refused NodeMaintenance", extra={"nodeMaintenance": obj.get("metadata", {}).get("name"), "reason": reason})
    return admission_response(uid, reason)


async def _policy_admission(kube: BlockingKubeApi, uid: str, req: dict[str, Any] | None, authorize: bool, namespace: str) -> dict[str, Any]:
    """Answer an AdmissionReview of a NodeMaintenancePolicy: its rules, then (``authorize``) whether its author may
    do what its drain defaults and hooks ask of the operator for every maintenance it governs."""
    answer = policy_admission_response({"request": req} if req is not None else None, namespace)
    if req is None or not answer["response"]["allowed"] or req.get("operation") not in ("CREATE", "UPDATE") or not authorize:
        return answer
    obj = req["object"]
    if not authority.changed(obj, req.get("oldObject") if req.get("operation") == "UPDATE" else None):
        return answer
    reason = await _unauthorized(kube, req, f"NodeMaintenancePolicy {(obj.get('metadata') or {}).get('name', '')}", authority.policy_needs(obj))
    if reason:
        log.info("refused NodeMaintenancePolicy", extra={"reason": reason})
    return admission_response(uid, reason)


async def _unauthorized(kube: BlockingKubeApi, req: dict[str, Any], what: str, needs: tuple[authority.Need, ...]) -> str | None:
    """Why the review's user may not ask ``needs`` of the operator (the API server asked, in a worker thread), or None."""
    named = req.get("userInfo")
    user: dict[str, Any] = named if isinstance(named, dict) else {}
    if not needs:
        return None
    if not user.get("username") and not user.get("groups"):  # the API server always names one: in doubt, refused
        return f"{what}: request.userInfo names no user, so whether they may do what it asks cannot be asked; send the review the API server sends"
    try:
        unmet = await asyncio.to_thread(authorization.unmet, kube, user, needs)
    except authorization.Unanswered as error:
        log.warning("admission check could not ask the API server: %s", error)
        return f"{what}: {error}"
    return f"{what}: " + "; ".join(need.refusal(str(user.get("username", ""))) for need in unmet) if unmet else None


async def start_webhook_server(*, host: str, port: int, cert_dir: Path, kube: BlockingKubeApi, namespace: str,
                               authorize: bool = False) -> web.AppRunner:
    """Serve the webhooks over TLS on ``host:port``; the certificate follows rotations of the files. ``authorize``: each
    review asks the API server whether its author may do what the object asks of the operator (the releases whose
    CSV grants the operator SubjectAccessReviews turn it on; older bundles run this code without that right).
    ``namespace``: the operator's own, where no policy's hook Job may run."""
    runner = await certs.serve(_app(kube, authorize, namespace), host, port, cert_dir)
    log.info("webhooks serving", extra={"address": f"{host}:{port}"})
    return runner

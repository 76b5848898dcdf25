"""/metrics over HTTPS, to whom the API server says may read it: the caller's bearer token is reviewed
(TokenReview) and its user asked whether it may ``get`` the ``/metrics`` path (SubjectAccessReview), as
controller-runtime's secured metrics and kube-rbac-proxy ask. The metrics tell how many nodes are held and which
pods were escalated; a pod that can reach the port is not thereby allowed to read them.

The endpoint serves with the webhooks' certificate (where OLM mounts it, reloaded when rotated). An answer of the
API server is kept a minute per token, so a scraper's every scrape does not cost two requests; when the API
server cannot answer, the scrape is refused (503) and tried again at the next one.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from node_maintenance.api import access_reviews
from node_maintenance.api.paths import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from node_maintenance.client.errors import KubeError
from node_maintenance.client.protocol import BlockingKubeApi
from node_maintenance.webhooks import certs

METRICS_PATH = "/metrics"
# How long an answer about one token is kept; and how many tokens' answers at most (a scraper or two, in practice).
KEPT_SECONDS = 60.0
KEPT_TOKENS = 64


class Scrapers:
    """Who may scrape: the HTTP status a request with ``token`` gets (200, 401 or 403)."""

    def __init__(self, kube: BlockingKubeApi, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.clock = clock
        self._kept: dict[str, tuple[float, int]] = {}

    def status(self, token: str) -> int:
        """Blocking: reviews the token and asks about its user unless an answer is kept; a KubeError when the API
        server cannot answer (nothing is kept then)."""
        if not token:
            return 401
        key = hashlib.sha256(token.encode()).hexdigest()  # the token itself is never kept
        kept = self._kept.get(key)
        if kept and self.clock() - kept[0] < KEPT_SECONDS:
            return kept[1]
        answer = self._ask(token)
        if len(self._kept) >= KEPT_TOKENS:
            self._kept.clear()
        self._kept[key] = (self.clock(), answer)
        return answer

    def _ask(self, token: str) -> int:
        review = self.kube.request("POST", TOKEN_REVIEWS, body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                               "spec": {"token": token}})
        reviewed = review.get("status") or {}
        if not reviewed.get("authenticated"):
            return 401
        user: dict[str, Any] = reviewed.get("user") or {}
        review = access_reviews.subject_access_review(user, nonResourceAttributes={"path": METRICS_PATH, "verb": "get"})
        access = self.kube.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
        return 200 if (access.get("status") or {}).get("allowed") else 403


def app(scrapers: Scrapers) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        try:
            status = await asyncio.to_thread(scrapers.status, token.strip() if scheme.lower() == "bearer" else "")
        except KubeError:
            return web.Response(status=503, text="the API server could not say who is asking; try again")
        if status == 401:
            return web.Response(status=401, text="send a bearer token the API server accepts", headers={"WWW-Authenticate": "Bearer"})
        if status == 403:
            return web.Response(status=403, text=f"this user may not get {METRICS_PATH}; bind a ClusterRole that allows it")
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    served = web.Application()
    served.router.add_get(METRICS_PATH, metrics)
    return served


async def start(host: str, port: int, cert_dir: Path, kube: BlockingKubeApi) -> web.AppRunner:
    """Serve /metrics over TLS on ``host:port`` with the certificate in ``cert_dir``, followed as it rotates."""
    return await certs.serve(app(Scrapers(kube)), host, port, cert_dir)
